package node

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// CNIVersion110 is the newest cniVersion: containerd 2.x accepts a 1.1.0
// result and sends STATUS for a 1.1.0 config; containerd 1.6 rejects it
// (CNIVersion).
const CNIVersion110 = "1.1.0"

// TestContainerd2 is what containerd 2.x does differently from containerd
// 1.6 that matters to plexus, one subtest each. The rest of the node
// tests run on it too (make test-runtimes).
func TestContainerd2(t *testing.T) {
	env := kubeenv.ForTest(t, kubeenv.Options{})
	node := Start(t, env, Options{Name: "node-containerd2", Runtime: Containerd2})

	// containerd 2.x's libcni accepts a 1.1.0 result: with plexus's
	// config at 1.1.0 a pod runs on all its networks and is deleted
	// cleanly.
	t.Run("CNIVersion110", func(t *testing.T) {
		n := node.With(t)
		w := n.PlexusWorld()
		n.installPlexusAt(w, nil, CNIVersion110)
		podWithSelections(t, n, w, "cd2-v110")
	})

	// For a 1.1.0 config containerd 2.x sends STATUS on every CRI Status
	// call and reports the network not ready while it fails: in thick
	// mode a plexusd outage makes the node NotReady until plexusd is back.
	t.Run("CNIStatus", func(t *testing.T) { testCNIStatus(t, node) })

	// containerd 2.x sends no CNI GC either: a pod's life and a restart
	// of containerd bring STATUS calls but no GC, so plexusd's own
	// collection (TestThickGCCollectsLostSandbox) stays needed.
	t.Run("NoCNIGC", func(t *testing.T) { testNoCNIGC(t, node) })

	// A deleted pod's sandbox gets a DEL when it is stopped (with the
	// netns and the cached result as prevResult) and another when it is
	// removed (netns gone): plexus answers both and nothing is left.
	t.Run("RepeatedDEL", func(t *testing.T) { testRepeatedDEL(t, node) })

	// plexusd finds a running sandbox's network namespace in the verbose
	// PodSandboxStatus (cmd/internal/cri): containerd 2.x builds it in its
	// podsandbox controller, and it still carries runtimeSpec's path.
	t.Run("SandboxStatusNetns", func(t *testing.T) { testSandboxStatusNetns(t, node) })

	// The sandbox image is images' pinned_images.sandbox, and containerd
	// 2.x reports it pinned, so kubelet's image GC never removes the
	// image every sandbox runs.
	t.Run("PinnedPauseImage", func(t *testing.T) { testPinnedPauseImage(t, node) })
}

// installPlexusAt is InstallPlexus (InstallSpy when spy is set) with the
// conflist at cniVersion version.
func (n *Node) installPlexusAt(w *harness.World, spy map[string]any, version string) {
	n.t.Helper()
	var list map[string]any
	harness.Must(n.t, json.Unmarshal(n.plexusConflist(w, spy), &list))
	list["cniVersion"] = version
	data, err := json.MarshalIndent(list, "", "  ")
	harness.Must(n.t, err)
	n.writeCNIConfig("00-plexus.conflist", data, PlexusNetwork)
}

// installSpyAt is InstallSpy at cniVersion version.
func (n *Node) installSpyAt(w *harness.World, logPath, version string) {
	n.t.Helper()
	n.installPlexusAt(w, map[string]any{"type": "cnispy", "cnispyType": w.Plexus["type"], "cnispyLog": logPath}, version)
}

// waitSpyCommand waits until cnispy's log holds a call of command.
func waitSpyCommand(t *testing.T, path, command string) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		for _, c := range readSpyLog(t, path) {
			if c.Command == command {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd sent no %s within %s", command, readyTimeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitNotReady waits until the node is not Ready for a reason containing
// substr, and returns that reason.
func (n *Node) waitNotReady(substr string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	last := ""
	for {
		last = n.readiness(ctx)
		if strings.Contains(last, substr) {
			return last
		}
		if ctx.Err() != nil {
			n.t.Fatalf("node %s did not become NotReady with %q within %s (last: %q)", n.Name, substr, readyTimeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func testCNIStatus(t *testing.T, node *Node) {
	n, w, d := thickNode(t, node)
	t.Cleanup(func() { logOnFailure(t, d) })
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.installSpyAt(w, spyLog, CNIVersion110)
	waitSpyCommand(t, spyLog, "STATUS")

	d.Stop()
	why := n.waitNotReady("NetworkReady=false")
	t.Logf("plexusd stopped: %s", why)
	d.Start()
	n.WaitReady()
}

func testNoCNIGC(t *testing.T, node *Node) {
	n := node.With(t)
	w := n.PlexusWorld()
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.installSpyAt(w, spyLog, CNIVersion110)
	p := runSelectingPod(t, n, w, "cd2-nogc")
	n.StopContainerd()
	n.StartContainerd()
	n.WaitReady()
	p.deleteAndCheck(t)
	waitSpyCommand(t, spyLog, "STATUS")
	counts := map[string]int{}
	for _, c := range readSpyLog(t, spyLog) {
		counts[c.Command]++
	}
	t.Logf("containerd's calls: %v", counts)
	if counts["GC"] != 0 {
		t.Errorf("containerd 2.x sent %d GC calls: plexus's docs and plexusd's collection assume none", counts["GC"])
	}
}

func testRepeatedDEL(t *testing.T, node *Node) {
	n := node.With(t)
	w := n.PlexusWorld()
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.InstallSpy(w, spyLog)
	p := runSelectingPod(t, n, w, "cd2-dels")
	p.deleteAndCheck(t)

	dels := spyCalls(t, spyLog, "DEL", p.sb.ID)
	if len(dels) < 2 {
		t.Fatalf("containerd sent %d DELs for sandbox %s, want one at stop and one at removal", len(dels), p.sb.ID)
	}
	if first := dels[0]; first.Netns != p.sb.Netns || !first.HasPrevResult {
		t.Errorf("first DEL: netns %q prevResult %v, want the sandbox's %q and the cached result", first.Netns, first.HasPrevResult, p.sb.Netns)
	}
	if last := dels[len(dels)-1]; last.Netns != "" {
		t.Errorf("last DEL's CNI_NETNS %q, want none (the namespace is gone)", last.Netns)
	}
}

func testSandboxStatusNetns(t *testing.T, node *Node) {
	n := node.With(t)
	w := n.PlexusWorld()
	n.InstallPlexus(w)
	p := runSelectingPod(t, n, w, "cd2-netns")
	got := n.inspectSandbox(p.sb.ID).Netns // as the runtime reports it now
	want := filepath.Join(n.Dir, "state", "io.containerd.grpc.v1.cri", "netns") + "/"
	if got != p.sb.Netns || !strings.HasPrefix(got, want) {
		t.Errorf("netns %q, want the sandbox's %q under %s", got, p.sb.Netns, want)
	}
	p.deleteAndCheck(t)
}

func testPinnedPauseImage(t *testing.T, node *Node) {
	n := node.With(t)
	out, err := n.Crictl(t.Context(), "images", "-o", "json")
	harness.Must(t, err)
	var list struct {
		Images []struct {
			RepoTags []string `json:"repoTags"`
			Pinned   bool     `json:"pinned"`
		} `json:"images"`
	}
	harness.Must(t, json.Unmarshal([]byte(out), &list))
	for _, img := range list.Images {
		for _, tag := range img.RepoTags {
			if tag == PauseImage {
				if !img.Pinned {
					t.Errorf("%s is not pinned", PauseImage)
				}
				return
			}
		}
	}
	t.Fatalf("%s not among the CRI's images: %s", PauseImage, out)
}
