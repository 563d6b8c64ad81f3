package node

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestMultusPods: pods written for the reference implementation (Multus),
// unchanged, under kubelet and containerd with plexus's default
// configuration (Multus compatibility on): the comma format's
// "name@ifname", and a JSON element with "default-route" and "cni-args".
// Each comes up on all its networks, with the requested interface names,
// route and delegate arguments, and is deleted cleanly.
func TestMultusPods(t *testing.T) {
	node := startNode(t, "node-multus")
	t.Run("Thin", func(t *testing.T) {
		n := node.With(t)
		w := n.PlexusWorld()
		n.InstallPlexus(w)
		multusPods(t, n, w, "multus-thin")
	})
	// plexusd changes the route: it runs in the host's namespaces, as a
	// DaemonSet does, and reaches the pod's through its path.
	t.Run("Thick", func(t *testing.T) {
		n, w, d := thickNode(t, node)
		n.InstallPlexus(w)
		multusPods(t, n, w, "multus-thick")
		logOnFailure(t, d)
	})
}

func multusPods(t *testing.T, n *Node, w *harness.World, nsName string) {
	bridgeNADs(t, n, w, nsName, "net-a", "net-b")
	subnet := harness.Subnet()
	var a, b int
	_, _ = fmt.Sscanf(subnet, "10.%d.%d.0/24", &a, &b)
	gw := fmt.Sprintf("10.%d.%d.1", a, b)
	uplink, _ := json.Marshal(map[string]any{"cniVersion": CNIVersion, "name": "uplink", "plugins": []any{
		map[string]any{"type": "bridge", "bridge": w.Bridge(), "isGateway": true,
			"ipam": map[string]any{"type": "host-local", "subnet": subnet, "dataDir": w.IPAMDir}},
		map[string]any{"type": "tuning"},
	}})
	harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, nsName, "uplink", string(uplink)))

	t.Run("CommaWithInterfaceNames", func(t *testing.T) {
		before := harness.HostVeths(t)
		pod := n.RunPod(nsName, "comma", "net-a@eth1,net-b")
		assertAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {nsName + "/net-a", "eth1"}, {nsName + "/net-b", "net1"}})
		sb := n.ReadySandbox(pod)
		n.DeletePod(nsName, pod.Name)
		assertCleanedUp(t, w, before, sb.ID)
	})

	t.Run("DefaultRouteAndCNIArgs", func(t *testing.T) {
		before := harness.HostVeths(t)
		pod := n.RunPod(nsName, "json", `[{"name":"net-a","interface":"eth1"},{"name":"uplink","default-route":["`+gw+`"],"cni-args":{"mtu":1400}}]`)
		c := assertAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {nsName + "/net-a", "eth1"}, {nsName + "/uplink", "net1"}})
		if got := c.DefaultRoutes(t, netlink.FAMILY_V4); len(got) != 1 || got[0] != "via "+gw+" dev net1" {
			t.Errorf("pod's IPv4 default routes %v, want only via %s dev net1", got, gw)
		}
		if mtu := c.Links(t)["net1"].Attrs().MTU; mtu != 1400 {
			t.Errorf("net1 MTU %d, want 1400 from cni-args (tuning's args.cni)", mtu)
		}
		if e := n.NetworkStatus(nsName, pod.Name); len(e) != 3 || e[2].Default || !e[0].Default {
			t.Errorf("network-status: only the cluster network is default (s5.3.5): %+v", e)
		}
		sb := n.ReadySandbox(pod)
		n.DeletePod(nsName, pod.Name)
		assertCleanedUp(t, w, before, sb.ID)
	})
}
