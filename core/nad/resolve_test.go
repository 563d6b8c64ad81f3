package nad

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newNAD(ns, name, config string) *NetworkAttachmentDefinition {
	return &NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: Spec{Config: config}}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolveS3_4_1Rule1SpecConfig(t *testing.T) {
	r, err := Resolve(newNAD("ns", "net-a", `{"cniVersion":"0.3.0","name":"net-a","type":"bridge"}`), t.TempDir())
	if err != nil || r.Source != "spec.config" {
		t.Fatalf("%v %v", r, err)
	}
}

func TestResolveS3_4_2NameInjection(t *testing.T) {
	for _, cfg := range []string{
		`{"cniVersion":"0.3.0","type":"awesome-plugin"}`,
		`{"cniVersion":"0.3.0","name":"","type":"awesome-plugin"}`,
		`{"cniVersion":"0.3.0","plugins":[{"type":"awesome-plugin"}]}`,
	} {
		r, err := Resolve(newNAD("ns", "a-bridge-network", cfg), "")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(r.Config, &got); err != nil {
			t.Fatal(err)
		}
		if got["name"] != "a-bridge-network" {
			t.Errorf("%s: name = %v", cfg, got["name"])
		}
	}
	// A config that has its own name keeps it (s3.4.3 allows a mismatch).
	r, err := Resolve(newNAD("ns", "nad", `{"name":"other","type":"bridge"}`), "")
	if err != nil || !strings.Contains(string(r.Config), `"other"`) {
		t.Fatalf("%s %v", r.Config, err)
	}
}

func TestResolveS3_4_1Rules2And3ConfDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "00-broken.conflist", `{`)
	writeFile(t, dir, "10-net-a.conf", `{"name":"net-a","type":"macvlan"}`)
	writeFile(t, dir, "20-net-a.conflist", `{"name":"net-a","plugins":[{"type":"bridge"}]}`)
	writeFile(t, dir, "30-net-b.json", `{"name":"net-b","type":"ipvlan"}`)
	writeFile(t, dir, "40-net-c.txt", `{"name":"net-c","type":"ipvlan"}`)

	r, err := Resolve(newNAD("ns", "net-a", ""), dir)
	if err != nil || !strings.HasSuffix(r.Source, "20-net-a.conflist") {
		t.Fatalf("rule 2 must prefer the conflist: %v %v", r, err)
	}
	r, err = Resolve(newNAD("ns", "net-b", ""), dir)
	if err != nil || !strings.HasSuffix(r.Source, "30-net-b.json") {
		t.Fatalf("rule 3: %v %v", r, err)
	}
	_, err = Resolve(newNAD("ns", "net-c", ""), dir)
	if err == nil || !strings.Contains(err.Error(), "ns/net-c") || !strings.Contains(err.Error(), "s3.4.1") {
		t.Fatalf("rule 4 must fail naming the NAD: %v", err)
	}
}

func TestResolveErrorsNameTheNAD(t *testing.T) {
	tests := []struct {
		nad  *NetworkAttachmentDefinition
		want string
	}{
		{newNAD("ns", "bad", `{not json`), "ns/bad: spec.config"},
		{newNAD("ns", "bad", `{"name":"x","type":"../sh"}`), "plain executable"},
		{newNAD("Bad", "x", `{"type":"bridge"}`), "DNS-1123"},
		{newNAD("ns", "x_y", `{"type":"bridge"}`), "DNS-1123"},
	}
	for _, tt := range tests {
		_, err := Resolve(tt.nad, "")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s/%s: err = %v, want %q", tt.nad.Namespace, tt.nad.Name, err, tt.want)
		}
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	n := newNAD("ns", "a", "{}")
	n.Labels = map[string]string{"k": "v"}
	c := n.DeepCopy()
	c.Labels["k"] = "changed"
	if n.Labels["k"] != "v" {
		t.Error("DeepCopy shares labels")
	}
}
