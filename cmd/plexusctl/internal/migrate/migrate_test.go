package migrate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each testdata directory holds a Multus config as an operator has it
// (input.*) and what plexusctl migrate makes of it (want/). Regenerate
// deliberately with PLEXUS_UPDATE_GOLDEN=1 go test ./cmd/plexusctl/internal/migrate.
func TestMigrateGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/*/input.*")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, in := range cases {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			out := t.TempDir()
			var stdout bytes.Buffer
			if err := Run(context.Background(), Args{From: in, Out: out, PolicyDir: DefaultPolicyDir}, nil, &stdout); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "report.txt"), stdout.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			compareDir(t, out, filepath.Join(dir, "want"))
		})
	}
}

func compareDir(t *testing.T, got, want string) {
	t.Helper()
	if os.Getenv("PLEXUS_UPDATE_GOLDEN") == "1" {
		os.RemoveAll(want)
		if err := os.CopyFS(want, os.DirFS(got)); err != nil {
			t.Fatal(err)
		}
	}
	gotFiles, _ := os.ReadDir(got)
	wantFiles, _ := os.ReadDir(want)
	if len(gotFiles) != len(wantFiles) {
		t.Errorf("wrote %d files, want %d (%s)", len(gotFiles), len(wantFiles), want)
	}
	for _, f := range wantFiles {
		w, _ := os.ReadFile(filepath.Join(want, f.Name()))
		g, err := os.ReadFile(filepath.Join(got, f.Name()))
		if err != nil || !bytes.Equal(g, w) {
			t.Errorf("%s differs from %s:\n%s", f.Name(), want, g)
		}
	}
}

func TestMigrateErrors(t *testing.T) {
	tests := []struct{ name, input, want string }{
		{"not multus", `{"cniVersion":"0.3.1","name":"x","type":"bridge"}`, "not a Multus CNI config"},
		{"configmap without multus", "kind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata:\n  a.json: '{}'\n", "none of its keys (a.json)"},
		{"neither default network", `{"type":"multus","name":"m"}`, `"clusterNetwork" is required`},
		{"bad logOptions", `{"type":"multus","name":"m","clusterNetwork":"/x","logFile":"/l","logOptions":{"maxSize":-5}}`, `"logOptions.maxSize": -5`},
		{"delegates not a list", `{"type":"multus","name":"m","delegates":{}}`, `"delegates": want a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "in")
			os.WriteFile(p, []byte(tt.input), 0o644)
			var stdout bytes.Buffer
			if err := Run(context.Background(), Args{From: p, Out: t.TempDir(), PolicyDir: DefaultPolicyDir}, nil, &stdout); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v; want %q", err, tt.want)
			}
		})
	}
}

// Without a cluster, migrate needs a file; the command line turns these
// into usage errors (cmd/plexusctl's tests).
func TestMigrateNeedsASource(t *testing.T) {
	var stdout bytes.Buffer
	if err := Run(context.Background(), Args{}, nil, &stdout); err == nil || !strings.Contains(err.Error(), "--from FILE") {
		t.Errorf("error %v, want one naming --from FILE", err)
	}
}

func pod(ns, name string, ann map[string]string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
}

func TestAnalyzePods(t *testing.T) {
	res, err := Convert(map[string]json.RawMessage{"type": raw(`"multus"`), "name": raw(`"m"`), "clusterNetwork": raw(`"/x"`),
		"namespaceIsolation": raw(`true`), "globalNamespaces": raw(`"shared"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pod  corev1.Pod
		want string // "" : no finding
	}{
		{pod("a", "plain", nil), ""},
		{pod("a", "good", map[string]string{"k8s.v1.cni.cncf.io/networks": "net-a,shared/net-b"}), ""},
		{pod("a", "upper", map[string]string{"k8s.v1.cni.cncf.io/networks": "Net_A"}), "plexus attaches the default network only"},
		{pod("a", "ignored-key", map[string]string{"k8s.v1.cni.cncf.io/networks": `[{"name":"net-a","foo":1}]`}), `key "foo" ignored: unknown key`},
		{pod("a", "cni-args-ips", map[string]string{"k8s.v1.cni.cncf.io/networks": `[{"name":"net-a","cni-args":{"IPs":["10.1.0.9/24"]}}]`}), `key "IPs" is read by delegates as "ips"`},
		{pod("a", "bad-default", map[string]string{"v1.multus-cni.io/default-network": "calico@eth0"}), "plexus fails the pod's ADD"},
		{pod("a", "isolated-default", map[string]string{"v1.multus-cni.io/default-network": "calico"}), "would deny kube-system/calico"},
		{pod("a", "own-default", map[string]string{"v1.multus-cni.io/default-network": "a/calico"}), ""},
		{pod("b", "global-default", map[string]string{"v1.multus-cni.io/default-network": "shared/calico"}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.pod.Name, func(t *testing.T) {
			got := res.AnalyzePods([]corev1.Pod{tt.pod})
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("findings %+v, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0].Reason, tt.want) || got[0].Pod != tt.pod.Namespace+"/"+tt.pod.Name):
				t.Errorf("findings %+v, want one with %q", got, tt.want)
			}
		})
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }
