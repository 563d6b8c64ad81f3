package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/tests/harness"
)

// kustomize builds a kustomization as `kubectl apply -k` would.
func kustomize(t *testing.T, dir string) string {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := m.AsYaml()
	harness.Must(t, err)
	return string(out)
}

// kinds lists "Kind namespace/name" of a multi-document YAML stream.
func kinds(t *testing.T, stream string) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(stream, "\n---\n") {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		}
		harness.Must(t, yaml.Unmarshal([]byte(doc), &o))
		if o.Kind != "" {
			out = append(out, o.Kind+" "+o.Metadata.Namespace+"/"+o.Metadata.Name)
		}
	}
	sort.Strings(out)
	return out
}

// testKustomizations: both install paths build and are accepted by the
// real apiserver (server-side dry run): thick (deploy/, plexusd's
// DaemonSet) and thin (deploy/thin, the installer's instead).
func (s *suite) testKustomizations(t *testing.T) {
	for _, v := range []struct {
		dir         string
		want, never string
	}{
		{"deploy", "DaemonSet kube-system/plexusd", "DaemonSet kube-system/plexus"},
		{"deploy/thin", "DaemonSet kube-system/plexus", "DaemonSet kube-system/plexusd"},
	} {
		dir, err := filepath.Abs(filepath.Join("..", "..", v.dir))
		harness.Must(t, err)
		out := kustomize(t, dir)
		got := kinds(t, out)
		if !contains(got, v.want) || contains(got, v.never) || !contains(got, "CustomResourceDefinition /network-attachment-definitions.k8s.cni.cncf.io") {
			t.Errorf("%s builds %v", v.dir, got)
		}
		file := filepath.Join(t.TempDir(), "built.yaml")
		harness.Must(t, os.WriteFile(file, []byte(out), 0o644))
		if err := s.env.Apply(t.Context(), true, file); err != nil {
			t.Errorf("server-side dry run of kustomize %s: %v", v.dir, err)
		}
	}
}
