package security

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// entries lists what each directory holds (not recursive).
func entries(dirs ...string) map[string]bool {
	out := map[string]bool{}
	for _, d := range dirs {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			out[filepath.Join(d, e.Name())] = true
		}
	}
	return out
}

// watch snapshots the places a path-like name could escape to: the file
// system root and well-known system directories, the test's own dir and
// its parent (where "../" from the cache would land), and the cache. The
// returned check fails on any new entry except the cache's own
// directories and plexus's log.
func watch(t *testing.T, h *harness.World) func() {
	dirs := []string{"/", "/etc", "/bin", "/usr/bin", filepath.Dir(h.Dir), h.Dir, h.CacheDir, filepath.Join(h.CacheDir, "results")}
	before := entries(dirs...)
	expected := map[string]bool{h.CacheDir: true, filepath.Join(h.Dir, "plexus.log"): true}
	for _, sub := range []string{"records", "results", "locks", "deleted"} {
		expected[filepath.Join(h.CacheDir, sub)] = true
	}
	return func() {
		t.Helper()
		for p := range entries(dirs...) {
			if !before[p] && !expected[p] {
				t.Errorf("a file appeared outside plexus's directories: %s", p)
			}
		}
	}
}

// TestPathLikeSelectionRefused: names from the annotation that would be
// paths (s4.1: NAD names and namespaces are DNS-1123 labels, s3.3;
// interface names follow the kernel's rules, s4.1.2.1.5) make the
// annotation invalid. With strictSelection the ADD fails (code 100) naming
// the problem; without, the pod gets the default network only (s4.1
// "invalid and ignored"). Nothing is attached or written anywhere.
func TestPathLikeSelectionRefused(t *testing.T) {
	cases := []struct{ name, ann, want string }{
		{"interface dot-dot", `[{"name":"net-a","interface":"../../x"}]`, `interface name "../../x"`},
		{"interface slash", `[{"name":"net-a","interface":"a/b"}]`, `interface name "a/b"`},
		{"NAD name json", `[{"name":"../x"}]`, `"../x"`},
		{"NAD name text", `../x`, `".."`},
		{"namespace", `[{"name":"net-a","namespace":"../../etc"}]`, `"../../etc"`},
	}
	for _, tc := range cases {
		eachStrictness(t, tc.name, tc.ann, func(t *testing.T, h *harness.World, c *harness.Container, strict bool) {
			check := watch(t, h)
			before := harness.HostVeths(t)
			_, e := h.Plugin(c, "ADD")
			if strict {
				harness.AssertCNIError(t, e, 100, "pod demo/web", tc.want)
				assertNothingAttached(t, h, c, before)
			} else {
				if e != nil {
					t.Fatalf("lenient ADD: %+v", e)
				}
				assertDefaultOnly(t, h, c, before)
			}
			check()
		})
	}
}

// TestPathLikeNADConfigRefused: a NAD author's delegate config cannot name
// a program by path (plugin and IPAM "type" are executable names looked
// up in the plugin directories) nor a network name that libcni would join
// into a cache path. The ADD fails before any delegate runs (code 101),
// naming the NAD and the key.
func TestPathLikeNADConfigRefused(t *testing.T) {
	cases := []struct{ name, want string }{
		{"type relative", `"type": plugin type "../../bin/sh"`},
		{"type absolute", `"type": plugin type "/bin/sh"`},
		{"ipam type", `"ipam.type": plugin type "/bin/sh"`},
		{"network name", `network name "../../etc"`},
		{"chained plugin type", `plugin 1: "type": plugin type "../sh"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.New(t)
			h.NAD("demo", "evil", hostileConfig(h, tc.name))
			h.Pod("demo", "web", "evil")
			c := h.Container("demo", "web")
			check := watch(t, h)
			before := harness.HostVeths(t)
			h.AddRefused(c, before, 101, "pod demo/web", "demo/evil", tc.want)
			check()
		})
	}
}

// hostileConfig is a bridge NAD config with one path-like value.
func hostileConfig(h *harness.World, which string) string {
	plugin := map[string]any{
		"type": "bridge", "bridge": h.Bridge(),
		"ipam": map[string]any{"type": "host-local", "subnet": harness.Subnet(), "dataDir": h.IPAMDir},
	}
	conf := map[string]any{"cniVersion": "1.0.0", "name": "evil"}
	switch which {
	case "type relative":
		plugin["type"] = "../../bin/sh"
	case "type absolute":
		plugin["type"] = "/bin/sh"
	case "ipam type":
		plugin["ipam"].(map[string]any)["type"] = "/bin/sh"
	case "network name":
		conf["name"] = "../../etc"
	case "chained plugin type":
		conf["plugins"] = []any{plugin, map[string]any{"type": "../sh"}}
		b, _ := json.Marshal(conf)
		return string(b)
	}
	for k, v := range plugin {
		conf[k] = v
	}
	b, _ := json.Marshal(conf)
	return string(b)
}

// TestPathLikeRuntimeArgumentsRefused: the runtime's CNI_ARGS pod name and
// CNI_CONTAINERID also end up in lookups and file names (records, locks);
// path-like values are refused with code 4 (invalid environment) before
// any file is made.
func TestPathLikeRuntimeArgumentsRefused(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	c := h.Container("demo", "../../x")
	check := watch(t, h)
	before := harness.HostVeths(t)
	_, e := h.PluginAs(c, "ADD", "c1")
	harness.AssertCNIError(t, e, 4, `K8S_POD_NAME "../../x"`)
	assertNothingAttached(t, h, c, before)

	// The CNI library's skel refuses it before plexus runs.
	ok := h.Container("demo", "web")
	_, e = h.PluginAs(ok, "ADD", "../../x")
	harness.AssertCNIError(t, e, 4, "containerID")
	assertNothingAttached(t, h, ok, before)
	check()
}
