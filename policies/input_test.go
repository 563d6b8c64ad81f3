package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
)

const goldenInput = "testdata/input.golden.json"

// The input document is a public interface (INPUT.md): any change to it
// shows up as a diff of this golden file. Regenerate deliberately with
// PLEXUS_UPDATE_GOLDEN=1 go test ./policies -run TestInputDocument.
func TestInputDocumentMatchesGolden(t *testing.T) {
	req := newRequest(t, `[{"name":"blue","ips":["10.10.0.7/24"],"mac":"02:00:00:00:00:01",`+
		`"interface":"data0","com.example.vlan":100},{"name":"red","namespace":"shared"}]`)
	req.Attachment.IfName = "data0"
	req.Attachment.ResourceName, req.Attachment.DeviceID = "vendor.example/netdev", "0000:18:02.5"
	in, err := BuildInput(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if os.Getenv("PLEXUS_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(goldenInput, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenInput)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("input document differs from %s:\n%s", goldenInput, got)
	}
}

func TestInputDocument(t *testing.T) {
	tests := []struct {
		name   string
		change func(*pipeline.AuthorizeRequest)
		check  func(t *testing.T, in map[string]any)
	}{
		{
			name:   "unknown namespace labels are absent, not empty",
			change: func(r *pipeline.AuthorizeRequest) { r.NamespaceLabels = nil },
			check: func(t *testing.T, in map[string]any) {
				if _, ok := in["namespace"].(map[string]any)["labels"]; ok {
					t.Fatal("namespace.labels present although the source has none")
				}
			},
		},
		{
			name:   "known empty namespace labels are present",
			change: func(r *pipeline.AuthorizeRequest) { r.NamespaceLabels = map[string]string{} },
			check: func(t *testing.T, in map[string]any) {
				if _, ok := in["namespace"].(map[string]any)["labels"]; !ok {
					t.Fatal("namespace.labels absent although the source has them")
				}
			},
		},
		{
			name:   "pod without labels gets an empty object",
			change: func(r *pipeline.AuthorizeRequest) { r.Pod.Labels = nil },
			check: func(t *testing.T, in map[string]any) {
				if l := in["pod"].(map[string]any)["labels"]; l == nil || len(l.(map[string]string)) != 0 {
					t.Fatalf("pod.labels = %#v", l)
				}
			},
		},
		{
			name: "single CNI config is summarised like a one-plugin list",
			change: func(r *pipeline.AuthorizeRequest) {
				r.Attachment.Config = json.RawMessage(`{"cniVersion":"0.4.0","name":"n","type":"bridge","ipam":{"type":"host-local"}}`)
			},
			check: func(t *testing.T, in map[string]any) {
				want := map[string]any{"cniVersion": "0.4.0", "name": "n", "plugins": []string{"bridge"}, "ipam": []string{"host-local"}}
				if got := in["nad"].(map[string]any)["config"]; !reflect.DeepEqual(got, want) {
					t.Fatalf("config summary %#v, want %#v", got, want)
				}
			},
		},
		{
			name:   "no CNI config means no summary",
			change: func(r *pipeline.AuthorizeRequest) { r.Attachment.Config = nil },
			check: func(t *testing.T, in map[string]any) {
				if _, ok := in["nad"].(map[string]any)["config"]; ok {
					t.Fatal("config summary present without config")
				}
			},
		},
		{
			name: "default network has no NAD or selection",
			change: func(r *pipeline.AuthorizeRequest) {
				r.Attachment.Default, r.Attachment.NAD, r.Attachment.Selection = true, nil, nil
			},
			check: func(t *testing.T, in map[string]any) {
				if in["nad"] != nil || in["selection"] != nil || in["default"] != true {
					t.Fatalf("nad %v, selection %v, default %v", in["nad"], in["selection"], in["default"])
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, "blue")
			tc.change(req)
			in, err := BuildInput(req)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, in)
		})
	}
}

func TestInputRefusesBrokenCNIConfig(t *testing.T) {
	req := newRequest(t, "blue")
	req.Attachment.Config = json.RawMessage(`{"plugins": [null]}`)
	if _, err := BuildInput(req); err == nil || !strings.Contains(err.Error(), "team-a/blue") {
		t.Fatalf("error %v, want one naming the network", err)
	}
	req.Attachment.Config = json.RawMessage(`[1]`)
	if _, err := BuildInput(req); err == nil || !strings.Contains(err.Error(), "team-a/web-0") {
		t.Fatalf("error %v, want one naming the pod", err)
	}
}

// Data files map into data as LoadPaths documents.
func TestDataLoading(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"root.json":                       `{"plexus": {"config": {"a": {"enabled": true}}}}`,
		"plexus/config/b.yaml":            "b:\n  enabled: false\n  namespaces: [x]\n",
		"..2024_01_01/dup.rego":           "package hidden\n\nx := 1\n",
		".hidden.json":                    `{"hidden": true}`,
		"notes.txt":                       "ignored",
		"extra/prefixed.yml":              "limit: 4\n",
		"policy/plexus/authz/ok.rego":     "package plexus.authz\n\nok := true\n",
		"policy/plexus/authz/x_test.rego": "package plexus.authz_test\n\ntest_x if true\n",
	})
	loaded, err := LoadPaths([]string{dir, "admin.limits:" + filepath.Join(dir, "extra", "prefixed.yml")}, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loaded.Data["plexus"].(map[string]any)["config"].(map[string]any)
	if cfg["a"].(map[string]any)["enabled"] != true {
		t.Errorf("root.json not merged at the root of data: %v", loaded.Data)
	}
	if cfg["b"].(map[string]any)["enabled"] != false {
		t.Errorf("plexus/config/b.yaml not placed under data.plexus.config: %v", cfg)
	}
	if _, ok := loaded.Data["hidden"]; ok {
		t.Error("hidden file loaded")
	}
	limits := loaded.Data["admin"].(map[string]any)["limits"].(map[string]any)
	if limits["limit"] == nil {
		t.Errorf("prefixed file not placed under data.admin.limits: %v", loaded.Data["admin"])
	}
	var names []string
	for n := range loaded.Modules {
		names = append(names, filepath.Base(n))
	}
	if !reflect.DeepEqual(names, []string{"ok.rego"}) {
		t.Errorf("modules %v, want only ok.rego (no hidden, no tests)", names)
	}
}

// Admin data in YAML and JSON reaches the policy the same way.
func TestDataFilesReachThePolicy(t *testing.T) {
	policy := decisionPolicy(`{"allowed": input.pod.namespace in data.plexus.allowed, "reasons": [{"code": "test", "message": "listed?"}]}`)
	for _, data := range []map[string]string{
		{"data.json": `{"plexus": {"allowed": ["team-a"]}}`},
		{"data.yaml": "plexus:\n  allowed:\n    - team-a\n"},
		{"data.yml": "plexus: {allowed: [team-b]}\n"},
	} {
		files := map[string]string{"p.rego": policy}
		var name string
		for n, c := range data {
			files[n], name = c, n
		}
		dir := writeFiles(t, files)
		d, err := newEngine(t, Config{Paths: []string{dir}}).Authorize(context.Background(), newRequest(t, "blue"))
		if err != nil {
			t.Fatal(err)
		}
		if want := !strings.HasSuffix(name, ".yml"); d.Allowed != want {
			t.Errorf("%s: allowed %v, want %v", name, d.Allowed, want)
		}
	}
}

// The input is converted lazily; what a policy reads must be what the
// document says, including the raw element kept as JSON until read.
func TestPolicyReadsEveryPartOfTheInput(t *testing.T) {
	policy := decisionPolicy(`{"allowed": true, "reasons": [{"code": "seen", "message": json.marshal([
		input.selection.raw["com.example.vlan"],
		input.selections[1].raw.namespace,
		input.pod.labels.app,
		input.nad.config.plugins,
		input.selection.index,
		input.default,
	])}]}`)
	e := newEngine(t, Config{Paths: []string{writeFiles(t, map[string]string{"p.rego": policy})}})
	req := newRequest(t, `[{"name":"blue","com.example.vlan":100},{"name":"red","namespace":"shared"}]`)
	d, err := e.Authorize(context.Background(), req)
	if err != nil || len(d.Reasons) != 1 {
		t.Fatalf("decision %+v, %v", d, err)
	}
	if want := `[100,"shared","web",["macvlan","tuning"],0,false]`; d.Reasons[0].Message != want {
		t.Errorf("policy read %s, want %s", d.Reasons[0].Message, want)
	}
}

// TestInputCNIArgsAsTheDelegateGetsThem: selection.cniArgs is the element's
// cni-args with its own checked keys, the object its delegates get.
func TestInputCNIArgsAsTheDelegateGetsThem(t *testing.T) {
	ann := `[{"name":"blue","ips":["10.10.0.7/24"],"cni-args":{"mtu":1400,"note":"x"}}]`
	res, err := selection.ParseWith(ann, "team-a", selection.ParseOptions{Compat: true})
	if err != nil {
		t.Fatal(err)
	}
	req := newRequest(t, `[{"name":"blue"}]`)
	req.Attachment.Selection = res.Elements[0]
	in, err := BuildInput(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(in["selection"].(map[string]any)["cniArgs"])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ips":["10.10.0.7/24"],"mtu":1400,"note":"x"}`; string(got) != want {
		t.Errorf("selection.cniArgs = %s, want %s", got, want)
	}
}
