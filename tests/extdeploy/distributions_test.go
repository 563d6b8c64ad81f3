package extdeploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// nodePathFlags are plexusd's flags naming host directories the runtime
// and the shim use too: each must be mounted at the same path it has on
// the host. (--cri-socket is reached through --delegate-root.)
var nodePathFlags = []string{"--cni-conf-dir", "--default-conf-dir", "--cni-bin-dir"}

// plexusdContainer is the DaemonSet's plexusd container with its env
// expanded into its args, as kubelet expands $(NAME).
func plexusdContainer(t *testing.T, ds *unstructured.Unstructured) (flags map[string]string, mounts map[string]string, hostPaths map[string]string) {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(ds.Object, "spec", "template", "spec")
	hostPaths = map[string]string{} // volume name -> host path
	for _, v := range spec["volumes"].([]any) {
		vol := v.(map[string]any)
		if hp, ok := vol["hostPath"].(map[string]any); ok {
			hostPaths[vol["name"].(string)] = hp["path"].(string)
		}
	}
	for _, c := range spec["containers"].([]any) {
		ctr := c.(map[string]any)
		if ctr["name"] != "plexusd" {
			continue
		}
		env := map[string]string{}
		expand := func(s string) string {
			for k, v := range env {
				s = strings.ReplaceAll(s, "$("+k+")", v)
			}
			return s
		}
		for _, e := range ctr["env"].([]any) {
			kv := e.(map[string]any)
			if v, ok := kv["value"].(string); ok {
				env[kv["name"].(string)] = expand(v)
			}
		}
		flags = map[string]string{}
		for _, a := range ctr["args"].([]any) {
			if k, v, ok := strings.Cut(a.(string), "="); ok {
				flags[k] = expand(v)
			}
		}
		mounts = map[string]string{} // mount path -> volume name
		for _, m := range ctr["volumeMounts"].([]any) {
			mount := m.(map[string]any)
			if p, ok := mount["mountPropagation"]; ok {
				t.Errorf("mount %s has mountPropagation %v: the install must not need the host's / shared", mount["mountPath"], p)
			}
			mounts[mount["mountPath"].(string)] = mount["name"].(string)
		}
		return flags, mounts, hostPaths
	}
	t.Fatal("no plexusd container")
	return nil, nil, nil
}

// TestDistributionsMountEachPathWhereTheHostHasIt: with deploy/ alone and
// with each component of deploy/distributions, every node directory
// plexusd's flags name lies in a host directory mounted at its host path,
// no mount is left at a default path the distribution does not use, none
// needs mount propagation, and the config names none of them; an
// extension component combines with it.
func TestDistributionsMountEachPathWhereTheHostHasIt(t *testing.T) {
	entries, err := os.ReadDir("../../deploy/distributions")
	if err != nil {
		t.Fatal(err)
	}
	cases := [][]string{nil}
	for _, e := range entries {
		cases = append(cases, []string{"distributions/" + e.Name()}, []string{"distributions/" + e.Name(), "extensions/image-volume"})
	}
	if len(cases) < 9 {
		t.Fatalf("deploy/distributions holds %d components, want k3s, rke2, openshift and microk8s", len(entries))
	}
	for _, components := range cases {
		t.Run(strings.Join(append([]string{"deploy"}, components...), "+"), func(t *testing.T) {
			conf, ds := renderWith(t, "deploy", components...)
			for _, k := range []string{"confDir", "binDir", "criSocket"} {
				if _, ok := conf[k]; ok {
					t.Errorf("plexusd.json names %s: the DaemonSet's flags set the node's paths", k)
				}
			}
			flags, mounts, hostPaths := plexusdContainer(t, ds)
			if hostPID, _, _ := unstructured.NestedBool(ds.Object, "spec", "template", "spec", "hostPID"); !hostPID || flags["--delegate-root"] != "/proc/1/root" {
				t.Errorf("hostPID %v, --delegate-root %q: the runtime's socket and network namespaces are reached through the host's /", hostPID, flags["--delegate-root"])
			}
			if !filepath.IsAbs(flags["--cri-socket"]) {
				t.Errorf("--cri-socket=%q: want an absolute path", flags["--cri-socket"])
			}
			for _, f := range nodePathFlags {
				p := flags[f]
				if !filepath.IsAbs(p) {
					t.Errorf("%s=%q: want an absolute path", f, p)
					continue
				}
				if m, ok := hostMountOf(p, mounts, hostPaths); !ok {
					t.Errorf("%s=%s lies in no host directory mounted at its own path (mounts %v)", f, p, mounts)
				} else if f == "--cni-conf-dir" || f == "--cni-bin-dir" {
					if m != p {
						t.Errorf("%s=%s is mounted as part of %s, want a volume of its own", f, p, m)
					}
				}
			}
			for _, def := range []string{"/etc/cni/net.d", "/opt/cni/bin"} {
				if _, ok := mounts[def]; ok && flags["--cni-conf-dir"] != def && flags["--cni-bin-dir"] != def {
					t.Errorf("%s is still mounted, though the distribution keeps its CNI dirs elsewhere", def)
				}
			}
			if len(components) == 2 {
				if _, ok := conf["extensions"]; !ok {
					t.Errorf("the extension component's config is lost")
				}
			}
		})
	}
}

// hostMountOf is the innermost mount path holding p, when its volume is
// the same host path.
func hostMountOf(p string, mounts, hostPaths map[string]string) (string, bool) {
	best := ""
	for m := range mounts {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best, best != "" && hostPaths[mounts[best]] == best
}
