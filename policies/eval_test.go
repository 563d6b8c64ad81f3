package policies

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadNADManifestsReadsEveryDocument(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nadDoc := func(ns, name string) string {
		return "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\nspec:\n  config: '{}'\n"
	}
	for _, tc := range []struct {
		name, body string
		want       []string // namespace/name, or the error's text
		err        bool
	}{
		{"one", nadDoc("a", "blue"), []string{"a/blue"}, false},
		{"several", "# comment\n" + nadDoc("a", "blue") + "---\n" + nadDoc("b", "red") + "---\n", []string{"a/blue", "b/red"}, false},
		{"json", `{"kind":"NetworkAttachmentDefinition","metadata":{"name":"j"}}`, []string{"default/j"}, false},
		{"another kind", nadDoc("a", "blue") + "---\nkind: Pod\nmetadata:\n  name: web\n", []string{"document 2: kind is \"Pod\""}, true},
		{"no name", "kind: NetworkAttachmentDefinition\n", []string{"document 1: metadata.name is empty"}, true},
		{"empty", "---\n", []string{"no document"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nads, err := ReadNADManifests(write(tc.name+".yaml", tc.body))
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want[0]) {
					t.Fatalf("err = %v, want one with %q", err, tc.want[0])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range nads {
				got = append(got, n.Namespace+"/"+n.Name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("NADs %v, want %v", got, tc.want)
			}
		})
	}
}
