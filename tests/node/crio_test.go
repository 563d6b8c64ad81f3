package node

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestCRIO is what CRI-O does differently from containerd that matters to
// plexus, one subtest each. The rest of the node tests run on it too
// (PLEXUS_RUNTIME=crio, make test-runtimes).
func TestCRIO(t *testing.T) {
	env := kubeenv.ForTest(t, kubeenv.Options{})
	node := Start(t, env, Options{Name: "node-crio", Runtime: CRIO})

	// CRI-O checks every ADD at once: a CNI CHECK with the ADD's result
	// as prevResult, and it fails the sandbox if CHECK fails. plexus
	// answers it in thin mode and, through the shim, in thick mode.
	t.Run("CheckAfterAdd", func(t *testing.T) {
		n := node.With(t)
		testCheckAfterAdd(t, n, n.PlexusWorld(), "crio-check")
	})
	t.Run("CheckAfterAddThick", func(t *testing.T) {
		n, w, d := thickNode(t, node)
		t.Cleanup(func() { logOnFailure(t, d) })
		testCheckAfterAdd(t, n, w, "crio-check-thick")
	})

	// CRI-O sends one DEL per sandbox, when it is stopped (with the netns
	// and the cached result); removing the stopped sandbox sends none.
	// containerd sends a second DEL at removal.
	t.Run("OneDEL", func(t *testing.T) { testOneDEL(t, node) })

	// CRI-O's DEL uses the network config the ADD used, kept in its libcni
	// cache, not the conf dir's current one: a pod added by plexus gets its
	// DEL from plexus even after the conf dir changed to the default
	// network alone. containerd uses the current config, and plexus never
	// hears of that DEL (TestThickGCCollectsLostSandbox).
	t.Run("DELWithCachedConfig", func(t *testing.T) { testDELWithCachedConfig(t, node) })

	// When its CNI plugin first becomes ready after a start, CRI-O
	// collects garbage: a DEL for each cached attachment of its networks
	// whose sandbox it does not have, then, for a 1.1.0 config, CNI GC
	// with its sandboxes as the valid attachments. A pod running across
	// the restart keeps its networks and is deleted cleanly.
	t.Run("StartupGC", func(t *testing.T) { testStartupGC(t, node) })

	// CRI-O runs no infra container by default (drop_infra_ctr): a
	// sandbox has no pause process, only namespaces pinned by pinns under
	// namespaces_dir. The verbose PodSandboxStatus still carries the
	// runtime spec with the network namespace's path, which plexusd reads
	// (cmd/internal/cri).
	t.Run("SandboxStatusNetns", func(t *testing.T) { testCRIOSandboxNetns(t, node) })

	// pause_image is listed in pinned_images and reported pinned, so
	// kubelet's image GC keeps it.
	t.Run("PinnedPauseImage", func(t *testing.T) { testPinnedPauseImage(t, node) })
}

func testCheckAfterAdd(t *testing.T, n *Node, w *harness.World, ns string) {
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.InstallSpy(w, spyLog)
	p := runSelectingPod(t, n, w, ns)
	adds := spyCalls(t, spyLog, "ADD", p.sb.ID)
	checks := spyCalls(t, spyLog, "CHECK", p.sb.ID)
	if len(adds) != 1 || len(checks) != 1 {
		t.Fatalf("CRI-O sent %d ADDs and %d CHECKs for sandbox %s, want 1 and 1", len(adds), len(checks), p.sb.ID)
	}
	if c := checks[0]; c.Netns != p.sb.Netns || !c.HasPrevResult || c.IfName != "eth0" {
		t.Errorf("CHECK: netns %q ifName %q prevResult %v, want the sandbox's %q, eth0 and the ADD's result", c.Netns, c.IfName, c.HasPrevResult, p.sb.Netns)
	}
	p.deleteAndCheck(t)
}

func testOneDEL(t *testing.T, node *Node) {
	n := node.With(t)
	_, spyLog, p := runSpiedPod(t, n, "crio-dels")
	p.deleteAndCheck(t)

	dels := spyCalls(t, spyLog, "DEL", p.sb.ID)
	if len(dels) != 1 {
		t.Fatalf("CRI-O sent %d DELs for sandbox %s, want 1 (at stop)", len(dels), p.sb.ID)
	}
	if d := dels[0]; d.Netns != p.sb.Netns || !d.HasPrevResult {
		t.Errorf("DEL: netns %q prevResult %v, want the sandbox's %q and the cached result", d.Netns, d.HasPrevResult, p.sb.Netns)
	}
}

func testStartupGC(t *testing.T, node *Node) {
	n := node.With(t)
	w := n.PlexusWorld()
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.installSpyAt(w, spyLog, CNIVersion110)
	p := runSelectingPod(t, n, w, "crio-gc")
	if gcs := countSpy(t, spyLog, "GC"); gcs != 0 {
		t.Fatalf("CRI-O sent %d GCs before its restart, want none (it collects at start only)", gcs)
	}
	n.StopContainerd()
	n.StartContainerd()
	n.WaitReady()
	waitSpyCommand(t, spyLog, "GC")
	if dels := spyCalls(t, spyLog, "DEL", p.sb.ID); len(dels) != 0 {
		t.Fatalf("CRI-O's collection sent %d DELs for the running sandbox %s", len(dels), p.sb.ID)
	}
	assertAttached(t, n, n.GetPod(p.ns, p.pod.Name), threeNetworks(p.ns))
	p.deleteAndCheck(t)
}

func countSpy(t *testing.T, path, command string) int {
	t.Helper()
	var c int
	for _, call := range readSpyLog(t, path) {
		if call.Command == command {
			c++
		}
	}
	return c
}

func testCRIOSandboxNetns(t *testing.T, node *Node) {
	n := node.With(t)
	w := n.PlexusWorld()
	n.InstallPlexus(w)
	p := runSelectingPod(t, n, w, "crio-netns")
	if p.sb.PID != 0 {
		t.Errorf("sandbox %s has a pause process %d: CRI-O's drop_infra_ctr is off?", p.sb.ID, p.sb.PID)
	}
	got := n.inspectSandbox(p.sb.ID).Netns // as the runtime reports it now
	if got != p.sb.Netns || !strings.HasPrefix(got, n.NetnsDir()+"/") {
		t.Errorf("netns %q, want the sandbox's %q under %s", got, p.sb.Netns, n.NetnsDir())
	}
	p.deleteAndCheck(t)
}

func testDELWithCachedConfig(t *testing.T, node *Node) {
	n := node.With(t)
	w, spyLog, p := runSpiedPod(t, n, "crio-cached")
	n.InstallDefault(w)
	p.deleteAndCheck(t)
	if dels := spyCalls(t, spyLog, "DEL", p.sb.ID); len(dels) != 1 {
		t.Errorf("plexus got %d DELs for sandbox %s after the conf dir changed, want 1", len(dels), p.sb.ID)
	}
}

// runSpiedPod runs a pod selecting two bridge networks in namespace ns
// through plexus behind the CNI spy, which logs every call the runtime
// makes to spyLog.
func runSpiedPod(t *testing.T, n *Node, ns string) (w *harness.World, spyLog string, p *selectingPod) {
	t.Helper()
	w = n.PlexusWorld()
	spyLog = filepath.Join(w.Dir, "cnispy.log")
	n.InstallSpy(w, spyLog)
	return w, spyLog, runSelectingPod(t, n, w, ns)
}
