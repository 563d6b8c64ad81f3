// Package extdeploy checks deploy/extensions against deploy/: each
// component replaces plexusd's whole config file to add "extensions", so
// every other key must stay as deploy/configmap.yaml has it.
package extdeploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// render renders a kustomization of deploy/ with component (none when
// ""), as docs/vendors.md writes it, and returns plexusd's config and the
// DaemonSet.
func render(t *testing.T, component string) (map[string]any, *unstructured.Unstructured) {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "/deploy\n"
	if component != "" {
		k += "components:\n  - " + rel + "/deploy/extensions/" + component + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize with %q: %v", component, err)
	}
	stream, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	var ds *unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		switch obj.GetKind() {
		case "ConfigMap":
			raw, _, _ := unstructured.NestedString(obj.Object, "data", "plexusd.json")
			if err := json.Unmarshal([]byte(raw), &conf); err != nil {
				t.Fatalf("%q: plexusd.json: %v", component, err)
			}
		case "DaemonSet":
			ds = obj
		}
	}
	return conf, ds
}

// TestComponentsKeepDeployConfig: with either component, plexusd's config
// is deploy/'s plus "extensions", naming a module under every mount the
// component adds.
func TestComponentsKeepDeployConfig(t *testing.T) {
	base, _ := render(t, "")
	for _, c := range []string{"image-volume", "init-container"} {
		t.Run(c, func(t *testing.T) {
			conf, ds := render(t, c)
			ext, ok := conf["extensions"].(map[string]any)
			if !ok {
				t.Fatalf("no extensions in plexusd.json: %v", conf)
			}
			delete(conf, "extensions")
			if !reflect.DeepEqual(conf, base) {
				t.Errorf("plexusd.json's other keys differ from deploy/configmap.yaml's:\n%v\nwant\n%v", conf, base)
			}
			mounts := map[string]bool{}
			containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				c := ctr.(map[string]any)
				if c["name"] != "plexusd" {
					continue
				}
				for _, m := range c["volumeMounts"].([]any) {
					mounts[m.(map[string]any)["mountPath"].(string)] = true
				}
			}
			for _, m := range ext["modules"].([]any) {
				p := m.(map[string]any)["path"].(string)
				if !mounts[filepath.Dir(p)] {
					t.Errorf("module %s: plexusd mounts nothing at %s", p, filepath.Dir(p))
				}
			}
		})
	}
}
