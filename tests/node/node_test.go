package node

import (
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestPodWithSelections: a pod created through the API selecting two NADs
// runs under kubelet and containerd with eth0, net1 and net2, its
// network-status lists the three attachments default first, and deleting
// it removes every attachment.
func TestPodWithSelections(t *testing.T) {
	env := kubeenv.ForTest(t, kubeenv.Options{})
	n := Start(t, env, Options{Name: "node-thin"})
	w := n.PlexusWorld()
	n.InstallPlexus(w)

	const ns = "thin"
	harness.Must(t, env.CreateNamespace(t.Context(), ns, nil))
	for _, nad := range []string{"blue", "red"} {
		harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, ns, nad, w.BridgeNADConfig(nad)))
	}
	before := harness.HostVeths(t)
	pod := n.RunPod(ns, "pod-a", "blue,red")
	c := n.PodNetns(pod)
	if got := harness.IfNames(c.Links(t)); len(got) != 3 || got[0] != "eth0" || got[1] != "net1" || got[2] != "net2" {
		t.Errorf("pod interfaces %v, want [eth0 net1 net2]", got)
	}
	for _, ifName := range []string{"eth0", "net1", "net2"} {
		if addrs := c.Addrs(t, ifName); len(addrs) == 0 {
			t.Errorf("%s has no address", ifName)
		}
	}
	st := n.NetworkStatus(ns, "pod-a")
	t.Logf("network-status: %+v", st)
	sb := n.ReadySandbox(pod)
	n.DeletePod(ns, "pod-a")
	w.AssertNoLeaks(before)
	if left := CNICacheEntries(sb.ID); len(left) > 0 {
		t.Errorf("libcni cache entries left for sandbox %s: %v", sb.ID, left)
	}
}
