package node

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// startNode is a control plane and a node on it, for one top-level test.
func startNode(t *testing.T, name string) *Node {
	t.Helper()
	env := kubeenv.ForTest(t, kubeenv.Options{})
	return Start(t, env, Options{Name: name})
}

// bridgeNADs creates a bridge NAD with host-local IPAM for each name, in a
// fresh namespace ns, on bridges and leases of w.
func bridgeNADs(t *testing.T, n *Node, w *harness.World, ns string, names ...string) {
	t.Helper()
	harness.Must(t, n.Env.CreateNamespace(t.Context(), ns, nil))
	for _, nad := range names {
		harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, ns, nad, w.BridgeNADConfig(nad)))
	}
}

// attachment is what a pod should have on one interface.
type attachment struct{ network, ifName string }

// assertAttached checks the pod's namespace has exactly the interfaces of
// want, each with an address, and that network-status lists them in order
// (default first) with those addresses.
func assertAttached(t *testing.T, n *Node, pod *corev1.Pod, want []attachment) *harness.Container {
	t.Helper()
	c := n.PodNetns(pod)
	var wantIfs []string
	for _, a := range want {
		wantIfs = append(wantIfs, a.ifName)
	}
	slices.Sort(wantIfs)
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, wantIfs) {
		t.Errorf("pod %s interfaces %v, want %v", pod.Name, got, wantIfs)
	}
	st := n.NetworkStatus(pod.Namespace, pod.Name)
	if len(st) != len(want) {
		t.Fatalf("network-status has %d entries, want %d: %+v", len(st), len(want), st)
	}
	for i, a := range want {
		e := st[i]
		if e.Name != a.network || e.Interface != a.ifName || e.Default != (i == 0) {
			t.Errorf("network-status[%d] = {name %q interface %q default %v}, want {%q %q %v}",
				i, e.Name, e.Interface, e.Default, a.network, a.ifName, i == 0)
		}
		addrs := c.IPs(t, a.ifName)
		if len(addrs) == 0 {
			t.Errorf("%s has no address", a.ifName)
		}
		if ips := slices.Sorted(slices.Values(e.IPs)); !reflect.DeepEqual(ips, addrs) {
			t.Errorf("network-status[%d] ips %v, but %s has %v", i, e.IPs, a.ifName, addrs)
		}
	}
	return c
}

// assertCleanedUp checks that nothing of a deleted pod's attachments is
// left: no host veth on w's bridges, no host-local lease, no plexus
// record, result or lock, no entry of the runtime's libcni cache.
func assertCleanedUp(t *testing.T, w *harness.World, before map[string]bool, sandboxID string) {
	t.Helper()
	w.AssertNoLeaks(before)
	if left := CNICacheEntries(sandboxID); len(left) > 0 {
		t.Errorf("libcni cache entries left for sandbox %s: %v", sandboxID, left)
	}
}

func threeNetworks(ns string) []attachment {
	return []attachment{{DefaultNetwork, "eth0"}, {ns + "/blue", "net1"}, {ns + "/red", "net2"}}
}

// selectingPod is pod-a in its own namespace, selecting the bridge NADs
// blue and red of a World.
type selectingPod struct {
	n      *Node
	w      *harness.World
	ns     string
	pod    *corev1.Pod
	sb     Sandbox
	before map[string]bool // the host's veths before the pod ran
}

// runSelectingPod creates the namespace ns with the NADs blue and red on
// w's bridges, runs pod-a selecting both, and checks its interfaces and
// network-status.
func runSelectingPod(t *testing.T, n *Node, w *harness.World, ns string) *selectingPod {
	t.Helper()
	bridgeNADs(t, n, w, ns, "blue", "red")
	before := harness.HostVeths(t)
	pod := n.RunPod(ns, "pod-a", "blue,red")
	assertAttached(t, n, pod, threeNetworks(ns))
	return &selectingPod{n: n, w: w, ns: ns, pod: pod, sb: n.ReadySandbox(pod), before: before}
}

// deleteAndCheck deletes the pod and checks nothing of it is left.
func (p *selectingPod) deleteAndCheck(t *testing.T) {
	t.Helper()
	p.n.DeletePod(p.ns, p.pod.Name)
	assertCleanedUp(t, p.w, p.before, p.sb.ID)
}

// podWithSelections runs a pod selecting two fresh bridge NADs in a fresh
// namespace and checks its interfaces and network-status, then deletes it
// and checks nothing is left.
func podWithSelections(t *testing.T, n *Node, w *harness.World, ns string) {
	t.Helper()
	runSelectingPod(t, n, w, ns).deleteAndCheck(t)
}

// TestThin is plexus installed as the node's CNI plugin, thin mode (the
// runtime runs plexus for every call), under kubelet and containerd.
func TestThin(t *testing.T) {
	node := startNode(t, "node-thin")

	// A pod created through the API selecting two NADs runs with eth0,
	// net1 and net2; deleting it removes every attachment.
	t.Run("PodWithSelections", func(t *testing.T) {
		n := node.With(t)
		w := n.PlexusWorld()
		n.InstallPlexus(w)
		podWithSelections(t, n, w, "thin-sel")
	})

	// A static pod's sandbox carries the static pod's UID, not its mirror
	// pod's: plexus must accept the mirror (kubernetes.io/config.mirror).
	t.Run("StaticPod", func(t *testing.T) {
		n := node.With(t)
		w := n.PlexusWorld()
		n.InstallPlexus(w)
		const ns = "thin-static"
		bridgeNADs(t, n, w, ns, "blue", "red")
		before := harness.HostVeths(t)
		manifest := n.WriteStaticPod(n.PodSpec(ns, "static-a", "blue,red"))
		mirror := n.MirrorPodName("static-a")
		pod, err := n.waitRunning(ns, mirror)
		if err != nil {
			t.Fatalf("static pod's mirror %s/%s not Running: %v\nevents:\n%s", ns, mirror, err, n.PodEvents(ns, mirror))
		}
		assertAttached(t, n, pod, threeNetworks(ns))
		sb := n.ReadySandbox(pod)
		n.removeStaticPod(manifest, ns, mirror)
		assertCleanedUp(t, w, before, sb.ID)
	})

	t.Run("RuntimeCalls", func(t *testing.T) { testRuntimeCalls(t, node.With(t)) })
}

// removeStaticPod removes a static pod's manifest and waits until kubelet
// has stopped it (its mirror gone, none of its sandboxes ready), then
// removes its sandboxes as kubelet's garbage collection would.
func (n *Node) removeStaticPod(manifest, namespace, mirror string) {
	n.t.Helper()
	pod := n.GetPod(namespace, mirror)
	harness.Must(n.t, os.Remove(manifest))
	n.WaitGone(namespace, mirror)
	for _, sb := range n.Sandboxes(pod, "") {
		n.WaitSandboxStopped(sb.ID)
	}
	n.RemoveSandboxes(pod)
}

// thickNode is the test's view of node, with a World whose plexusd serves
// the node.
func thickNode(t *testing.T, node *Node) (*Node, *harness.World, *harness.Daemon) {
	t.Helper()
	n := node.With(t)
	w := n.PlexusWorld()
	return n, w, w.StartDaemon("--node-name", n.Name)
}

// logOnFailure logs plexusd's log if the test has failed.
func logOnFailure(t *testing.T, d *harness.Daemon) {
	t.Helper()
	if t.Failed() {
		t.Logf("plexusd log:\n%s", d.Log())
	}
}

// TestThick is plexus in thick mode under kubelet: plexusd serves the node
// and the runtime runs the shim.
func TestThick(t *testing.T) {
	node := startNode(t, "node-thick")

	// plexusd restarted while a pod runs: the pod keeps its networks, and
	// its delete, served by the new plexusd, cleans up.
	t.Run("PlexusdRestart", func(t *testing.T) {
		n, w, d := thickNode(t, node)
		n.InstallPlexus(w)
		p := runSelectingPod(t, n, w, "thick-restart")

		d.Stop()
		d.Start()
		assertAttached(t, n, p.pod, threeNetworks(p.ns))
		p.deleteAndCheck(t)
		logOnFailure(t, d)
	})

	// plexusd is down when the pod is deleted: the shim tears the pod's
	// attachments down from plexus's record itself (DEL never waits).
	t.Run("PlexusdDownAtDelete", func(t *testing.T) {
		n, w, d := thickNode(t, node)
		n.InstallPlexus(w)
		p := runSelectingPod(t, n, w, "thick-down")

		d.Stop()
		p.deleteAndCheck(t)
		logOnFailure(t, d)
	})

	// The node "reboots" in simulation: kubelet and containerd stop and
	// start again while the pod runs. The pod keeps its sandbox, its
	// interfaces and its network-status; a later delete cleans up.
	t.Run("NodeReboot", func(t *testing.T) {
		n, w, d := thickNode(t, node)
		spyLog := filepath.Join(w.Dir, "cnispy.log")
		n.InstallSpy(w, spyLog)
		p := runSelectingPod(t, n, w, "thick-reboot")
		ns, sb := p.ns, p.sb
		status := n.GetPod(ns, "pod-a").Annotations[StatusAnnotation]

		n.StopKubelet()
		n.StopContainerd()
		n.StartContainerd()
		n.StartKubelet()
		n.WaitReady()
		// The pod's first sync by the new kubelet is where it would decide
		// to re-create the sandbox.
		n.WaitPodsSynced(1)

		running := n.WaitRunning(ns, "pod-a")
		if got := n.ReadySandbox(running); got.ID != sb.ID {
			t.Errorf("after the restart the pod's sandbox is %s, want the same %s", got.ID, sb.ID)
		}
		if got := n.GetPod(ns, "pod-a").Annotations[StatusAnnotation]; got != status {
			t.Errorf("network-status changed across the restart:\nbefore %s\nafter  %s", status, got)
		}
		assertAttached(t, n, running, threeNetworks(ns))
		if adds := spyCalls(t, spyLog, "ADD", sb.ID); len(adds) != 1 {
			t.Errorf("containerd sent %d ADDs for sandbox %s, want the 1 before the restart", len(adds), sb.ID)
		}
		p.deleteAndCheck(t)
		logOnFailure(t, d)
	})
}
