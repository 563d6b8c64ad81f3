package node

import (
	"fmt"
	"path/filepath"
	"testing"
)

// distributionFor is the component of deploy/distributions each runtime's
// node is laid out for in TestDeployDistribution: the node's CNI dirs are
// the test's own, and the component's paths are mapped onto them, so the
// component must name every path it moves consistently.
var distributionFor = map[Runtime]string{Containerd: "k3s", Containerd2: "microk8s", CRIO: "crio"}

// TestDeployDistribution installs deploy/ and deploy/thin with this
// runtime's distribution component on a node whose CNI dirs are not the
// default ones: pods attach through plexus in both modes, and plexusd
// finds the runtime's dirs where the component put its own. With a
// component that does not fit the node, plexusd refuses to start and
// names both directories.
func TestDeployDistribution(t *testing.T) {
	rt, err := runtimeOf(Options{})
	if err != nil {
		t.Fatal(err)
	}
	component := distributionFor[rt.Name()]
	for _, mode := range []struct{ base, container, bin string }{
		{"deploy", "plexusd", "plexus-shim"},
		{"deploy/thin", "install", "plexus"},
	} {
		t.Run(mode.base, func(t *testing.T) {
			node, d, world := deployNodeWith(t, "node-dist-"+filepath.Base(mode.base), func(n *Node) *Deployment {
				return n.RenderDistribution(t, mode.base, component, OnNodeDirs)
			})
			if mode.container == "plexusd" {
				d.ShareRuntimeSocket(t)
			}
			conf := filepath.Join(node.ConfDir, "00-plexus.conflist")
			installAwaitingDefault(t, node, d, world, mode.container, filepath.Join(node.cniBinDir, mode.bin), conf)
			podWithSelections(t, node.With(t), world, "dist-"+filepath.Base(mode.base))
			if mode.container == "plexusd" {
				d.WaitLog(t, d.WaitPod(t, deployImage), "plexusd", "confDir="+node.ConfDir+" ")
			}
		})
	}
	t.Run("ComponentOfAnotherLayoutIsRefused", func(t *testing.T) {
		node, d, _ := deployNodeWith(t, "node-dist-refused", func(n *Node) *Deployment {
			return n.RenderDistribution(t, "deploy", "k3s", UnderRoot)
		})
		d.ShareRuntimeSocket(t)
		d.Apply(t)
		ours := d.HostPath("/var/lib/rancher/k3s/agent/etc/cni/net.d")
		pod := d.WaitExited(t, "plexusd")
		d.WaitLog(t, pod, "plexusd",
			fmt.Sprintf("reads CNI configs from %s, not from --cni-conf-dir %s", node.ConfDir, ours))
		d.WaitLog(t, pod, "plexusd", "docs/install.md#distributions")
	})
}
