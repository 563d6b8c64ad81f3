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

// containerOf is the DaemonSet's container name: its flags (the last of
// each wins, as flag.Parse reads them) with its env expanded as kubelet
// expands $(NAME), its mounts (mount path to volume) and the host paths
// of the pod's hostPath volumes.
func containerOf(t *testing.T, ds *unstructured.Unstructured, name string) (flags map[string]string, mounts map[string]string, hostPaths map[string]string) {
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
		if ctr["name"] != name {
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
	t.Fatalf("no %s container in DaemonSet %s", name, ds.GetName())
	return nil, nil, nil
}

// modes are deploy/ and deploy/thin: their node agent's container and
// the flags naming host directories that must be mounted at their own path
// (the runtime and the plugin read the files plexus writes there), and
// those that must lie within the CNI config dir's mount.
var modes = []struct {
	base, container string
	dirFlags        []string
	inConfDir       []string
}{
	{"deploy", "plexusd", nodePathFlags, nil},
	{"deploy/thin", "install", []string{"--cni-conf-dir", "--default-conf-dir", "--cni-bin-dir"}, []string{"--kubeconfig", "--policy-dir"}},
}

// TestDistributionsMountEachPathWhereTheHostHasIt: in both modes, with
// the base alone and with each component of deploy/distributions, every
// node directory the agent's flags name lies in a host directory mounted
// at its host path, no mount is left at a default path the distribution
// does not use, none needs mount propagation, and plexusd's config names
// none of them; an extension component combines with it.
func TestDistributionsMountEachPathWhereTheHostHasIt(t *testing.T) {
	entries, err := os.ReadDir("../../deploy/distributions")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 5 {
		t.Fatalf("deploy/distributions holds %d components, want crio, k3s, rke2, openshift and microk8s", len(entries))
	}
	for _, mode := range modes {
		ext := "extensions/image-volume"
		if mode.base == "deploy/thin" {
			ext = "extensions/thin-image-volume"
		}
		cases := [][]string{nil}
		for _, e := range entries {
			cases = append(cases, []string{"distributions/" + e.Name()}, []string{"distributions/" + e.Name(), ext})
		}
		for _, components := range cases {
			t.Run(strings.Join(append([]string{mode.base}, components...), "+"), func(t *testing.T) {
				conf, ds := renderWith(t, mode.base, components...)
				flags, mounts, hostPaths := containerOf(t, ds, mode.container)
				if mode.container == "plexusd" {
					checkThick(t, conf, ds, flags)
				}
				checkMounts(t, mode.dirFlags, mode.inConfDir, flags, mounts, hostPaths)
				if len(components) == 2 {
					if _, ok := conf["extensions"]; !ok && mode.container == "plexusd" {
						t.Errorf("the extension component's config is lost")
					}
					if d := flags["--extensions-dir"]; mode.container == "install" && !strings.HasPrefix(d, flags["--cni-conf-dir"]+"/") {
						t.Errorf("--extensions-dir %q is not in the CNI config dir %s", d, flags["--cni-conf-dir"])
					}
				}
			})
		}
	}
}

// checkThick: plexusd's config names no node path, and plexusd reaches
// the runtime's socket through the host's root.
func checkThick(t *testing.T, conf map[string]any, ds *unstructured.Unstructured, flags map[string]string) {
	t.Helper()
	for _, k := range []string{"confDir", "binDir", "criSocket"} {
		if _, ok := conf[k]; ok {
			t.Errorf("plexusd.json names %s: the DaemonSet's flags set the node's paths", k)
		}
	}
	if hostPID, _, _ := unstructured.NestedBool(ds.Object, "spec", "template", "spec", "hostPID"); !hostPID || flags["--delegate-root"] != "/proc/1/root" {
		t.Errorf("hostPID %v, --delegate-root %q: the runtime's socket and network namespaces are reached through the host's /", hostPID, flags["--delegate-root"])
	}
	if !filepath.IsAbs(flags["--cri-socket"]) {
		t.Errorf("--cri-socket=%q: want an absolute path", flags["--cri-socket"])
	}
}

// checkMounts: each of dirFlags is a host directory mounted at its own
// path by a volume of its own, each of inConfDir lies in the CNI config
// dir, and no default CNI dir stays mounted that the flags do not name.
func checkMounts(t *testing.T, dirFlags, inConfDir []string, flags, mounts, hostPaths map[string]string) {
	t.Helper()
	for _, f := range dirFlags {
		p := flags[f]
		if !filepath.IsAbs(p) {
			t.Errorf("%s=%q: want an absolute path", f, p)
			continue
		}
		if m, ok := hostMountOf(p, mounts, hostPaths); !ok {
			t.Errorf("%s=%s lies in no host directory mounted at its own path (mounts %v)", f, p, mounts)
		} else if f != "--default-conf-dir" && m != p {
			t.Errorf("%s=%s is mounted as part of %s, want a volume of its own", f, p, m)
		}
	}
	for _, f := range inConfDir {
		if p := flags[f]; !strings.HasPrefix(p, flags["--cni-conf-dir"]+"/") {
			t.Errorf("%s=%q is not in the CNI config dir %s", f, p, flags["--cni-conf-dir"])
		}
	}
	for _, def := range []string{"/etc/cni/net.d", "/opt/cni/bin"} {
		if _, ok := mounts[def]; ok && flags["--cni-conf-dir"] != def && flags["--cni-bin-dir"] != def {
			t.Errorf("%s is still mounted, though the distribution keeps its CNI dirs elsewhere", def)
		}
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
