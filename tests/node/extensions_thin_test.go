package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/plexus-cni/plexus/tests/harness"
)

// thinExtDir is where deploy/extensions' thin components have the
// installer copy each module on the host.
const thinExtDir = "/etc/cni/net.d/plexus.d/extensions"

// TestDeployExtensionsThin is docs/vendors.md's "Thin mode" on a real
// node: the example vlan and enricher extensions packed with plexusctl
// ext pack, imported into the node's runtime and deployed with
// deploy/thin and deploy/extensions' thin component (init containers on
// containerd 1.6, image volumes on containerd 2.x). Beside them the node
// gets bad inputs: overrides over the memory limit its entry sets, and an
// extension whose image holds no module. The installer copies vlan and
// enricher to the host and names them in plexus's CNI config, refuses the
// bad ones, saying why, in its log and the node's PlexusNode, and leaves
// them out; the plugin, run by the runtime on the host, serves with vlan
// and enricher: a pod gets its status enriched and vlan rejects a pod's
// VLAN out of range. The uninstall removes the modules from the host.
func TestDeployExtensionsThin(t *testing.T) {
	v, delivery := newVendor(t)
	archives := map[string]string{}
	for _, m := range []string{"vlan", "enricher", "overrides"} {
		archives[m] = v.pack(v.module(m), "localhost/plexus-extensions/"+m+":1.0.0")
	}
	if t.Failed() {
		return
	}

	node, d, world := deployNode(t, "node-ext-thin", v.thinKustomization("thin-"+delivery))
	for _, a := range archives {
		node.ImportImage(t, a)
	}
	noModule := PauseImage
	if delivery == "init-container" {
		noModule = ""
	}
	addThinExtension(t, d, delivery, "overrides", "localhost/plexus-extensions/overrides:1.0.0", `"memoryLimitPages":1`)
	addThinExtension(t, d, delivery, "none", noModule, "")
	conf := filepath.Join(node.ConfDir, "00-plexus.conflist")
	plugin := filepath.Join(node.cniBinDir, "plexus")
	hostExt := d.HostPath(thinExtDir)

	t.Run("Deploy", func(t *testing.T) {
		n := node.With(t)
		installAwaitingDefault(t, n, d, world, "install", plugin, conf)
		p := d.WaitPod(t, deployImage)
		for _, want := range []string{
			`msg="installed extension module" module=vlan`,
			`msg="installed extension module" module=enricher`,
			`module=overrides err="extension \"overrides\": loading /opt/plexus/extensions/overrides/module.wasm: compiling: section memory: min 43 pages (2 Mi) over limit of 1 pages (64 Ki)"`,
			`module=none err="/opt/plexus/extensions/none/module.wasm: `,
		} {
			d.WaitLog(t, p, "install", want)
		}
		for m, want := range map[string]bool{"vlan": true, "enricher": true, "overrides": false, "none": false} {
			if got := exists(filepath.Join(hostExt, m, "module.wasm")); got != want {
				t.Errorf("%s on the host: %v, want %v", m, got, want)
			}
		}
		var list struct {
			Plugins []struct {
				Extensions struct {
					Modules []struct {
						Path string `json:"path"`
					} `json:"modules"`
				} `json:"extensions"`
			} `json:"plugins"`
		}
		raw, err := os.ReadFile(conf)
		harness.Must(t, err)
		harness.Must(t, json.Unmarshal(raw, &list))
		var paths []string
		for _, m := range list.Plugins[0].Extensions.Modules {
			paths = append(paths, m.Path)
		}
		want := []string{filepath.Join(hostExt, "vlan/module.wasm"), filepath.Join(hostExt, "enricher/module.wasm")}
		if fmt.Sprint(paths) != fmt.Sprint(want) {
			t.Errorf("plexus's config names modules %v, want %v:\n%s", paths, want, raw)
		}
		assertThinExtensionsReported(n, d)
	})
	if t.Failed() {
		return
	}

	t.Run("ModulesServe", func(t *testing.T) {
		n := node.With(t)
		const ns = "ext-thin-serve"
		bridgeNADs(t, n, world, ns, "blue")
		before := harness.HostVeths(t)
		p := n.RunPod(ns, "enriched", "blue")
		st := rawNetworkStatus(t, n, ns, "enriched")
		if len(st) != 2 || !strings.Contains(string(st[1]["io.plexus.status.gateways"]), ".1") {
			t.Errorf("network-status lacks enricher's gateways: %s", st)
		}
		n.CreatePod(n.PodSpec(ns, "vlan-5000", `[{"name":"blue","com.example.vlan":5000}]`))
		if msg := waitSandboxFailure(t, n, ns, "vlan-5000"); !strings.Contains(msg, `extension "vlan" rejected the attachment`) ||
			!strings.Contains(msg, "5000") {
			t.Errorf("vlan-5000's sandbox failed with %q, want vlan's rejection", msg)
		}
		n.DeletePod(ns, "vlan-5000")
		sb := n.ReadySandbox(p)
		n.DeletePod(ns, "enriched")
		assertCleanedUp(t, world, before, sb.ID)
	})
	if t.Failed() {
		return
	}

	t.Run("Uninstall", func(t *testing.T) {
		uninstallDeploy(t, d, "install", conf)
		for _, p := range []string{conf, hostExt} {
			d.WaitFile(t, p, false)
		}
	})
}

// thinKustomization writes docs/vendors.md's kustomization of deploy/thin
// with deploy/extensions' component, and returns its directory.
func (v *vendor) thinKustomization(component string) string {
	v.t.Helper()
	dir := filepath.Join(v.work, "my-plexus-thin")
	harness.Must(v.t, os.MkdirAll(dir, 0o755))
	root, err := filepath.Abs("../..")
	harness.Must(v.t, err)
	rel, err := filepath.Rel(dir, root)
	harness.Must(v.t, err)
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s/deploy/thin\ncomponents:\n  - %s/deploy/extensions/%s\n", rel, rel, component)
	harness.Must(v.t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return dir
}

// addThinExtension adds module name to the rendered thin DaemonSet as
// deploy/extensions' thin components do for vlan and enricher: image's
// module at extDir/NAME/module.wasm in the installer's container, named
// in its last --config with keys (JSON members) beside "path". No image
// mounts an empty directory there.
func addThinExtension(t *testing.T, d *Deployment, delivery, name, image, keys string) {
	t.Helper()
	mount := extDir + name
	for _, obj := range d.Objects {
		if obj.GetKind() != "DaemonSet" {
			continue
		}
		spec, _, err := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		harness.Must(t, err)
		vol := map[string]any{"name": "ext-" + name, "emptyDir": map[string]any{}}
		if delivery == "image-volume" && image != "" {
			vol = map[string]any{"name": "ext-" + name, "image": map[string]any{"reference": image, "pullPolicy": "IfNotPresent"}}
		}
		spec["volumes"] = append(spec["volumes"].([]any), vol)
		if delivery == "init-container" && image != "" {
			inits, _ := spec["initContainers"].([]any)
			spec["initContainers"] = append(inits, map[string]any{
				"name": "ext-" + name, "image": image, "args": []any{mount},
				"volumeMounts": []any{map[string]any{"name": "ext-" + name, "mountPath": mount}},
			})
		}
		for _, c := range spec["containers"].([]any) {
			ctr := c.(map[string]any)
			if ctr["name"] != "install" {
				continue
			}
			ctr["volumeMounts"] = append(ctr["volumeMounts"].([]any),
				map[string]any{"name": "ext-" + name, "mountPath": mount, "readOnly": true})
			args := ctr["args"].([]any)
			last := -1
			for i, a := range args {
				if strings.HasPrefix(a.(string), "--config=") {
					last = i
				}
			}
			if last < 0 {
				t.Fatal("the installer has no --config")
			}
			var conf map[string]any
			harness.Must(t, json.Unmarshal([]byte(strings.TrimPrefix(args[last].(string), "--config=")), &conf))
			var m map[string]any
			harness.Must(t, json.Unmarshal([]byte(`{"path":"`+mount+`/module.wasm"`+map[bool]string{true: "," + keys, false: ""}[keys != ""]+`}`), &m))
			ext := conf["extensions"].(map[string]any)
			ext["modules"] = append(ext["modules"].([]any), m)
			out, err := json.Marshal(conf)
			harness.Must(t, err)
			args[last] = "--config=" + string(out)
		}
		harness.Must(t, unstructured.SetNestedMap(obj.Object, spec, "spec", "template", "spec"))
	}
}

// assertThinExtensionsReported: the installer reports each module in the
// node's PlexusNode, the installed ones loaded, the refused ones with
// their error.
func assertThinExtensionsReported(n *Node, d *Deployment) {
	t := n.t
	t.Helper()
	d.waitFor(t, "PlexusNode "+n.Name+" with the extensions", func(ctx context.Context) (bool, string) {
		pn, err := getPlexusNode(ctx, n.Dyn, n.Name)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]string{}
		for _, e := range pn.Status.Extensions {
			got[filepath.Base(filepath.Dir(e.Path))] = fmt.Sprintf("%v %s", e.Loaded, e.Error)
		}
		ok := len(got) == 4 && got["vlan"] == "true " && got["enricher"] == "true " &&
			strings.Contains(got["overrides"], "false ") && strings.Contains(got["overrides"], "over limit") &&
			strings.Contains(got["none"], "no such file")
		return ok, fmt.Sprintf("extensions %v", got)
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
