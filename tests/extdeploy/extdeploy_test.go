// Package extdeploy checks deploy/extensions against deploy/ and
// deploy/thin: each thick component replaces plexusd's whole config file
// to add "extensions", so every other key must stay as
// deploy/configmap.yaml has it; each thin one adds the installer's
// --config again, so its other keys must stay as deploy/thin's.
package extdeploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// render renders a kustomization of deploy/ with component (none when
// ""), as docs/vendors.md writes it, and returns plexusd's config and the
// DaemonSet.
// defaultExtensionsSrc is the installer's --extensions-src-dir when a
// manifest sets none (plexusctl install -h).
const defaultExtensionsSrc = "/opt/plexus/extensions"

func render(t *testing.T, component string) (map[string]any, *unstructured.Unstructured) {
	return renderFrom(t, "deploy", component)
}

// renderFrom renders a kustomization of base (deploy or deploy/thin) with
// component of deploy/extensions.
func renderFrom(t *testing.T, base, component string) (map[string]any, *unstructured.Unstructured) {
	t.Helper()
	var components []string
	if component != "" {
		components = []string{"extensions/" + component}
	}
	return renderWith(t, base, components...)
}

// renderWith renders a kustomization of base with components, each a
// directory under deploy/.
func renderWith(t *testing.T, base string, components ...string) (map[string]any, *unstructured.Unstructured) {
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
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "/" + base + "\n"
	if len(components) > 0 {
		k += "components:\n"
	}
	for _, c := range components {
		k += "  - " + rel + "/deploy/" + c + "\n"
	}
	component := strings.Join(components, ",")
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

// installer is the thin DaemonSet's installer container: its flags, env
// expanded, and its mount paths.
func installer(t *testing.T, ds *unstructured.Unstructured) (flags map[string]string, mounts map[string]bool) {
	t.Helper()
	flags, byPath, _ := containerOf(t, ds, "install")
	mounts = map[string]bool{}
	for m := range byPath {
		mounts[m] = true
	}
	return flags, mounts
}

// TestThinComponentsKeepDeployArgs: with either thin component, the
// installer's flags are deploy/thin's plus --extensions-dir, and its
// --config is deploy/thin's plus "extensions", naming a module under
// every mount the component adds, at its path in the container.
func TestThinComponentsKeepDeployArgs(t *testing.T) {
	_, baseDS := renderFrom(t, "deploy/thin", "")
	base, _ := installer(t, baseDS)
	var baseConf map[string]any
	if err := json.Unmarshal([]byte(base["--config"]), &baseConf); err != nil {
		t.Fatalf("deploy/thin's --config: %v", err)
	}
	for _, c := range []string{"thin-image-volume", "thin-init-container"} {
		t.Run(c, func(t *testing.T) {
			_, ds := renderFrom(t, "deploy/thin", c)
			flags, mounts := installer(t, ds)
			if d := flags["--extensions-dir"]; !filepath.IsAbs(d) {
				t.Errorf("--extensions-dir %q, want an absolute path", d)
			}
			var conf map[string]any
			if err := json.Unmarshal([]byte(flags["--config"]), &conf); err != nil {
				t.Fatalf("--config: %v", err)
			}
			ext, ok := conf["extensions"].(map[string]any)
			if !ok {
				t.Fatalf("no extensions in --config: %v", conf)
			}
			delete(conf, "extensions")
			if !reflect.DeepEqual(conf, baseConf) {
				t.Errorf("--config's other keys differ from deploy/thin's:\n%v\nwant\n%v", conf, baseConf)
			}
			delete(flags, "--extensions-dir")
			delete(flags, "--config")
			for k, v := range base {
				if k != "--config" && flags[k] != v {
					t.Errorf("flag %s=%q, deploy/thin has %q", k, flags[k], v)
				}
			}
			if len(flags) != len(base)-1 {
				t.Errorf("flags %v, want deploy/thin's %v", flags, base)
			}
			src := defaultExtensionsSrc
			if s, ok := flags["--extensions-src-dir"]; ok {
				src = s
			}
			for _, m := range ext["modules"].([]any) {
				p := m.(map[string]any)["path"].(string)
				if filepath.Dir(filepath.Dir(p)) != src || !mounts[filepath.Dir(p)] {
					t.Errorf("module %s: want it in a mount under %s (mounts %v)", p, src, mounts)
				}
			}
		})
	}
}
