package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// extDir is where deploy/extensions puts each module in plexusd's
// container: /opt/plexus/extensions/NAME/module.wasm.
const extDir = "/opt/plexus/extensions/"

// newVendor is a vendor's workspace for the example modules, which it
// needs built, and the delivery the node's runtime supports: image volumes
// on containerd 2.x, init containers elsewhere.
func newVendor(t *testing.T) (v *vendor, delivery string) {
	rt, err := runtimeOf(Options{})
	harness.Must(t, err)
	delivery = "init-container"
	if rt.traits().imageVolumes {
		delivery = "image-volume"
	}
	binDir, err := kubeenv.DefaultBinDir()
	harness.Must(t, err)
	v = &vendor{t: t, bin: binDir, work: t.TempDir()}
	for _, m := range []string{"vlan", "enricher", "overrides"} {
		if _, err := os.Stat(v.module(m)); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found: run `make ext-examples`", v.module(m)))
		}
	}
	return v, delivery
}

// TestDeployExtensions is docs/vendors.md's walkthrough on a real node:
// the example vlan and enricher extensions tried with plexusctl ext run,
// packed with plexusctl ext pack, imported into the node's runtime and
// deployed with deploy/ (thick mode) and deploy/extensions: through init
// containers on containerd 1.6, through image volumes on containerd 2.x
// (PLEXUS_RUNTIME=containerd2). Beside them the node gets the bad inputs:
// a module whose keys clash with vlan's, one over its memory limit and an
// image without a module. plexusd refuses each with a clear error, in its
// log and metrics, and serves with vlan and enricher: a pod gets its
// status enriched, vlan rejects a pod's VLAN out of range, and a pod
// selecting the refused module's keys fails with the refusal. A new image
// tag for enricher rolls plexusd out with it.
func TestDeployExtensions(t *testing.T) {
	v, delivery := newVendor(t)

	// docs/vendors.md, "Test": the module run as plexusd runs it.
	t.Run("Run", func(t *testing.T) {
		out := v.ctl(0, "ext", "run", v.module("vlan"), "--hook", "prepare",
			"--input", "../../extensions/examples/vlan/testdata/prepare.json")
		if !strings.Contains(out, `"vlan": 100`) {
			t.Errorf("ext run did not set the bridge's vlan:\n%s", out)
		}
	})

	// docs/vendors.md, "Pack": one archive per module, named by default
	// as deploy/extensions names them; what plexusd would refuse is
	// refused here already.
	archives := map[string]string{}
	t.Run("Pack", func(t *testing.T) {
		v.t = t
		for _, m := range []string{"vlan", "enricher", "overrides"} {
			archives[m] = v.pack(v.module(m), "localhost/plexus-extensions/"+m+":1.0.0")
		}
		archives["vlan-copy"] = v.pack(v.clashingModule(), "localhost/plexus-extensions/vlan-copy:1.0.0")
		v.packRefused(filepath.Join(v.bin, "plexus-ext-copy"), "not a wasm binary")
		v.packRefused(v.overLimits(), "4294967295 functions claimed")
	})
	if t.Failed() {
		return
	}
	v.t = t

	node, d, world := deployNode(t, "node-ext-"+delivery, v.kustomization(delivery))
	for _, a := range archives {
		node.ImportImage(t, a)
	}
	// The bad inputs, delivered the same way: vlan-copy owns
	// com.example.sub., inside vlan's com.example.; overrides gets one
	// 64 KiB page, less than its Go runtime starts with; "none" names no
	// file (an image volume of an image without a module, the pause
	// image; on containerd 1.6 an emptyDir nothing copied into, as the
	// copier of such an image leaves it).
	noModule := PauseImage
	if delivery == "init-container" {
		noModule = ""
	}
	addExtension(t, d, delivery, "vlan-copy", "localhost/plexus-extensions/vlan-copy:1.0.0", nil)
	addExtension(t, d, delivery, "overrides", "localhost/plexus-extensions/overrides:1.0.0", map[string]any{"memoryLimitPages": 1})
	addExtension(t, d, delivery, "none", noModule, nil)
	d.ShareRuntimeSocket(t)
	conf := filepath.Join(node.ConfDir, "00-plexus.conflist")
	var pod string

	t.Run("Deploy", func(t *testing.T) {
		n := node.With(t)
		installAwaitingDefault(t, n, d, world, "plexusd", filepath.Join(n.cniBinDir, "plexus-shim"), conf)
		p := d.WaitPod(t, deployImage)
		pod = p.Name
		body := getBody(t.Context(), thickMetrics)
		for m, loaded := range map[string]bool{"vlan": true, "enricher": true, "vlan-copy": false, "overrides": false, extDir + "none/module.wasm": false} {
			series := `plexus_extension_module_loaded{module="` + m + `"`
			if !strings.Contains(body, series) {
				t.Errorf("no %s...} series:\n%s", series, linesWith(body, "plexus_extension_module_loaded"))
				continue
			}
			if got := harness.SumMetric(body, "plexus_extension_module_loaded", `module="`+m+`"`) == 1; got != loaded {
				t.Errorf("module %s loaded %v, want %v:\n%s", m, got, loaded, linesWith(body, "plexus_extension_module_loaded"))
			}
		}
		// Each refusal in plexusd's log says why; the clash names both.
		for _, want := range []string{
			`module \"vlan\" prefix \"com.example.\" overlaps module \"vlan-copy\" prefix \"com.example.sub.\"`,
			`extension \"overrides\": loading /opt/plexus/extensions/overrides/module.wasm: compiling: section memory: min 43 pages (2 Mi) over limit of 1 pages (64 Ki)`,
			`/opt/plexus/extensions/none/module.wasm: open /opt/plexus/extensions/none/module.wasm: no such file or directory`,
		} {
			d.WaitLog(t, p, "plexusd", want)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("ModulesServe", func(t *testing.T) {
		n := node.With(t)
		const ns = "ext-serve"
		bridgeNADs(t, n, world, ns, "blue")
		before := harness.HostVeths(t)
		// enricher adds the gateways to every attachment's status.
		p := n.RunPod(ns, "enriched", "blue")
		st := rawNetworkStatus(t, n, ns, "enriched")
		if len(st) != 2 || !strings.Contains(string(st[1]["io.plexus.status.gateways"]), ".1") {
			t.Errorf("network-status lacks enricher's gateways: %s", st)
		}
		// vlan rejects a VLAN out of range, before any delegate runs.
		n.CreatePod(n.PodSpec(ns, "vlan-5000", `[{"name":"blue","com.example.vlan":5000}]`))
		if msg := waitSandboxFailure(t, n, ns, "vlan-5000"); !strings.Contains(msg, `extension "vlan" rejected the attachment`) ||
			!strings.Contains(msg, "5000") {
			t.Errorf("vlan-5000's sandbox failed with %q, want vlan's rejection", msg)
		}
		// The keys of the refused overrides module get its failure policy
		// (prepare: fail), naming the refusal.
		n.CreatePod(n.PodSpec(ns, "overridden", `[{"name":"blue","io.plexus.overrides":{"mtu":1280}}]`))
		if msg := waitSandboxFailure(t, n, ns, "overridden"); !strings.Contains(msg, `extension "overrides", hook prepare: module refused at load`) {
			t.Errorf("overridden's sandbox failed with %q, want the refusal", msg)
		}
		body := getBody(t.Context(), thickMetrics)
		if v := harness.SumMetric(body, "plexus_extension_errors_total", `module="vlan"`, `kind="rejected"`); v == 0 {
			t.Errorf("plexusd counted no vlan rejection: %s", linesWith(body, "plexus_extension_errors_total"))
		}
		n.DeletePod(ns, "vlan-5000")
		n.DeletePod(ns, "overridden")
		sb := n.ReadySandbox(p)
		n.DeletePod(ns, "enriched")
		assertCleanedUp(t, world, before, sb.ID)
	})
	if t.Failed() {
		return
	}

	// docs/vendors.md, "Publish" and "Upgrade": enricher's next version
	// pushed to a registry (one in this process, on loopback, which
	// containerd reaches over plain HTTP), named in the DaemonSet: a new
	// pod template, which the DaemonSet rolls out; the node pulls it.
	t.Run("Upgrade", func(t *testing.T) {
		n := node.With(t)
		reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer reg.Close()
		ref := strings.TrimPrefix(reg.URL, "http://") + "/vendor/enricher:1.0.1"
		v.t = t
		v.ctl(0, "ext", "pack", "--wasm", v.module("enricher"), "--tag", ref, "--push")
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"initContainers":[{"name":"ext-enricher","image":%q}]}}}}`, ref)
		if delivery == "image-volume" {
			patch = fmt.Sprintf(`{"spec":{"template":{"spec":{"volumes":[{"name":"ext-enricher","image":{"reference":%q}}]}}}}`, ref)
		}
		d.Patch(t, patch)
		p := d.WaitRollout(t, deployImage)
		if p.Name == pod {
			t.Fatalf("plexusd's pod %s was not replaced", pod)
		}
		d.waitFor(t, "the new plexusd loaded enricher", func(ctx context.Context) (bool, string) {
			body := getBody(ctx, thickMetrics)
			return harness.SumMetric(body, "plexus_extension_module_loaded", `module="enricher"`) == 1, linesWith(body, "plexus_extension_module_loaded")
		})
		const ns = "ext-upgraded"
		bridgeNADs(t, n, world, ns, "blue")
		n.RunPod(ns, "enriched", "blue")
		if st := rawNetworkStatus(t, n, ns, "enriched"); len(st) != 2 || len(st[1]["io.plexus.status.gateways"]) == 0 {
			t.Errorf("after the upgrade, network-status lacks enricher's gateways: %s", st)
		}
		n.DeletePod(ns, "enriched")
	})

	t.Run("Uninstall", func(t *testing.T) {
		uninstallDeploy(t, d, "plexusd", conf)
		d.WaitFile(t, conf, false)
	})
}

// vendor runs docs/vendors.md's commands with the built plexusctl.
type vendor struct {
	t    *testing.T
	bin  string // make build's output: plexusctl, plexus-ext-copy, extensions/
	work string
}

func (v *vendor) module(name string) string { return filepath.Join(v.bin, "extensions", name+".wasm") }

// ctl runs plexusctl, failing t unless it exits with code; it returns
// stdout, and stderr after it.
func (v *vendor) ctl(code int, args ...string) string {
	v.t.Helper()
	cmd := exec.Command(filepath.Join(v.bin, "plexusctl"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if got := cmd.ProcessState.ExitCode(); got != code {
		v.t.Fatalf("plexusctl %s: exit %d (%v), want %d\n%s%s", strings.Join(args, " "), got, err, code, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// pack is `plexusctl ext pack --wasm FILE --tag REF -o FILE.tar`, whose
// JSON report names the image ref; it returns the archive.
func (v *vendor) pack(wasm, ref string) string {
	v.t.Helper()
	out := filepath.Join(v.work, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	report := v.ctl(0, "ext", "pack", "--wasm", wasm, "--tag", ref, "-o", out)
	var info struct {
		Ref    string `json:"ref"`
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(report), &info); err != nil || info.Ref != ref || !strings.HasPrefix(info.Digest, "sha256:") {
		v.t.Fatalf("ext pack's report %q (%v), want ref %s and a digest", report, err, ref)
	}
	return out
}

// packRefused packs wasm and wants exit 1 with want in the error and no
// archive written.
func (v *vendor) packRefused(wasm, want string) {
	v.t.Helper()
	out := filepath.Join(v.work, "refused.tar")
	if msg := v.ctl(1, "ext", "pack", "--wasm", wasm, "-o", out); !strings.Contains(msg, want) {
		v.t.Errorf("ext pack %s: %q, want %q", wasm, msg, want)
	}
	if _, err := os.Stat(out); err == nil {
		v.t.Errorf("ext pack %s wrote %s", wasm, out)
	}
}

// clashingModule is vlan's module declaring itself vlan-copy, owning
// com.example.sub., which vlan's com.example. holds.
func (v *vendor) clashingModule() string {
	return v.withManifest("vlan", `{"abi":1,"name":"vlan-copy","version":"1.0.0","prefixes":["com.example.sub."],"hooks":["prepare"]}`, nil)
}

// overLimits is vlan's module with a function section claiming four
// billion functions.
func (v *vendor) overLimits() string {
	return v.withManifest("vlan", "", func(id byte, body []byte) []byte {
		if id == wasmfmt.SectionFunction {
			return wasmfmt.AppendU32(nil, 1<<32-1)
		}
		return body
	})
}

// withManifest rewrites module name's file with its manifest replaced
// (when manifest is set) and each section passed through edit (when set).
func (v *vendor) withManifest(name, manifest string, edit func(id byte, body []byte) []byte) string {
	v.t.Helper()
	bin, err := os.ReadFile(v.module(name))
	harness.Must(v.t, err)
	sections, err := wasmfmt.Sections(bin)
	harness.Must(v.t, err)
	out := []byte(wasmfmt.Header)
	for _, s := range sections {
		if s.ID == wasmfmt.SectionCustom && manifest != "" && wasmfmt.NewDecoder(s.Body).Name() == abi.ManifestSection {
			continue
		}
		body := s.Body
		if edit != nil {
			body = edit(s.ID, body)
		}
		out = wasmfmt.AppendSection(out, s.ID, body)
	}
	if manifest != "" {
		out = wasmfmt.AppendCustomSection(out, abi.ManifestSection, []byte(manifest))
	}
	p := filepath.Join(v.work, fmt.Sprintf("%s-%d.wasm", name, time.Now().UnixNano()))
	harness.Must(v.t, os.WriteFile(p, out, 0o644))
	return p
}

// kustomization writes docs/vendors.md's kustomization of deploy/ with
// deploy/extensions' component for delivery, and returns its directory.
func (v *vendor) kustomization(delivery string) string {
	v.t.Helper()
	dir := filepath.Join(v.work, "my-plexus")
	harness.Must(v.t, os.MkdirAll(dir, 0o755))
	root, err := filepath.Abs("../..")
	harness.Must(v.t, err)
	rel, err := filepath.Rel(dir, root)
	harness.Must(v.t, err)
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s/deploy\ncomponents:\n  - %s/deploy/extensions/%s\n", rel, rel, delivery)
	harness.Must(v.t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return dir
}

// addExtension adds module name to the rendered DaemonSet and plexusd's
// config as deploy/extensions does for vlan and enricher: image's module
// at extDir/NAME/module.wasm, with config's keys beside "path". No image
// mounts an empty directory there.
func addExtension(t *testing.T, d *Deployment, delivery, name, image string, config map[string]any) {
	t.Helper()
	mount := extDir + name
	for _, obj := range d.Objects {
		switch obj.GetKind() {
		case "DaemonSet":
			spec, _, err := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
			harness.Must(t, err)
			vol := map[string]any{"name": "ext-" + name, "emptyDir": map[string]any{}}
			if delivery == "image-volume" && image != "" {
				vol = map[string]any{"name": "ext-" + name, "image": map[string]any{"reference": image, "pullPolicy": "IfNotPresent"}}
			}
			spec["volumes"] = append(spec["volumes"].([]any), vol)
			if delivery == "init-container" && image != "" {
				inits, _ := spec["initContainers"].([]any)
				spec["initContainers"] = append([]any{map[string]any{
					"name": "ext-" + name, "image": image, "args": []any{mount},
					"volumeMounts": []any{map[string]any{"name": "ext-" + name, "mountPath": mount}},
				}}, inits...)
			}
			for _, c := range spec["containers"].([]any) {
				if ctr := c.(map[string]any); ctr["name"] == "plexusd" {
					ctr["volumeMounts"] = append(ctr["volumeMounts"].([]any),
						map[string]any{"name": "ext-" + name, "mountPath": mount, "readOnly": true})
				}
			}
			harness.Must(t, unstructured.SetNestedMap(obj.Object, spec, "spec", "template", "spec"))
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			raw, ok := data["plexusd.json"]
			if !ok {
				continue
			}
			var conf map[string]any
			harness.Must(t, json.Unmarshal([]byte(raw), &conf))
			ext := conf["extensions"].(map[string]any)
			m := map[string]any{"path": mount + "/module.wasm"}
			for k, v := range config {
				m[k] = v
			}
			ext["modules"] = append(ext["modules"].([]any), m)
			out, err := json.Marshal(conf)
			harness.Must(t, err)
			data["plexusd.json"] = string(out)
			harness.Must(t, unstructured.SetNestedStringMap(obj.Object, data, "data"))
		}
	}
}

// waitSandboxFailure waits for the pod's FailedCreatePodSandBox event and
// returns its message.
func waitSandboxFailure(t *testing.T, n *Node, ns, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), podTimeout)
	defer cancel()
	for {
		if msg := n.sandboxFailure(ctx, ns, name); msg != "" {
			return msg
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no FailedCreatePodSandBox for %s/%s; events:\n%s", ns, name, n.PodEvents(ns, name))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// rawNetworkStatus is the pod's network-status with every key kept.
func rawNetworkStatus(t *testing.T, n *Node, ns, name string) []map[string]json.RawMessage {
	t.Helper()
	n.NetworkStatus(ns, name) // waits for it
	var st []map[string]json.RawMessage
	harness.Must(t, json.Unmarshal([]byte(n.GetPod(ns, name).Annotations[StatusAnnotation]), &st))
	return st
}
