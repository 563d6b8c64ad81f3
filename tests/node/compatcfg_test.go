package node

import (
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// PodDefaultNetworkAnnotation is Multus's per-pod default network, which
// plexus honours (core/selection.DefaultNetworkAnnotation).
const PodDefaultNetworkAnnotation = "v1.multus-cni.io/default-network"

// TestCompatCfgPodDefaultNetwork: a pod created through the API with
// v1.multus-cni.io/default-network gets its eth0, and so its pod IP, from
// the NAD it names instead of the node's default network; deleting it
// removes every attachment.
func TestCompatCfgPodDefaultNetwork(t *testing.T) {
	node := startNode(t, "node-compatcfg")
	n := node.With(t)
	w := n.PlexusWorld()
	n.InstallPlexus(w)
	const ns = "compat-default"
	bridgeNADs(t, n, w, ns, "alt-default", "blue")
	before := harness.HostVeths(t)

	spec := n.PodSpec(ns, "pod-a", "blue")
	spec.Annotations[PodDefaultNetworkAnnotation] = ns + "/alt-default"
	n.CreatePod(spec)
	pod := n.WaitRunning(ns, "pod-a")
	c := assertAttached(t, n, pod, []attachment{{"alt-default", "eth0"}, {ns + "/blue", "net1"}})
	podIP := n.GetPod(ns, "pod-a").Status.PodIP
	if addrs := c.Addrs(t, "eth0"); len(addrs) == 0 || podIP == "" || !strings.HasPrefix(addrs[0], podIP+"/") {
		t.Errorf("pod IP %q is not eth0's address %v from the chosen network", podIP, addrs)
	}
	sb := n.ReadySandbox(pod)
	n.DeletePod(ns, pod.Name)
	assertCleanedUp(t, w, before, sb.ID)
}
