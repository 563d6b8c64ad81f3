package node

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/tests/harness"
)

// gcWait bounds the wait for plexusd's collection (a pass every second).
const gcWait = 30 * time.Second

// TestThickGCCollectsLostSandbox: containerd (1.6, 2.x) never sends CNI GC,
// so a sandbox whose DEL never reached plexus (here: the node's CNI config
// was the default network alone while the pod was deleted and its sandbox
// removed) would keep its attachment record, lock and IPAM leases forever.
// plexusd, with criSocket set, collects them once the runtime no longer
// lists the sandbox, and leaves a running pod, and a stopped sandbox the
// runtime still lists, alone.
func TestThickGCCollectsLostSandbox(t *testing.T) {
	node := startNode(t, "node-gc")
	n := node.With(t)
	w := n.PlexusWorld()
	w.Set("criSocket", n.Socket)
	w.Set("gcInterval", "1s")
	w.Set("gcGrace", "1s")
	d := w.StartDaemon("--node-name", n.Name)
	t.Cleanup(func() { logOnFailure(t, d) })
	n.InstallPlexus(w)
	const ns = "gc-lost"
	bridgeNADs(t, n, w, ns, "blue")
	before := harness.HostVeths(t)

	keep := n.RunPod(ns, "pod-keep", "blue")
	lost := n.RunPod(ns, "pod-lost", "blue")
	keepSB, lostSB := n.ReadySandbox(keep), n.ReadySandbox(lost)
	// containerd's libcni keeps plexus's result for the lost sandbox: its
	// DEL goes to the default network alone.
	t.Cleanup(func() { RemoveCNICacheEntries(t, lostSB.ID) })
	// Closed at once: a handle on the namespace would keep it, and the
	// host ends of its veths, alive after the sandbox is removed.
	harness.Must(t, assertAttached(t, n, lost, blueOnly(ns)).NS.Close())
	keepStatus := n.GetPod(ns, "pod-keep").Annotations[StatusAnnotation]

	// The DELs of the pod's deletion and of its sandbox's removal go to
	// the default network alone: plexus never hears of them.
	n.InstallDefault(w)
	if n.rt.traits().delFromCache {
		// CRI-O sends DEL with the config the ADD used, from its libcni
		// cache (TestRuntimes/crio/DELWithCachedConfig): without the
		// cache entry it falls back to the current one.
		RemoveCNICacheEntries(t, lostSB.ID)
	}
	harness.Must(t, n.Client.CoreV1().Pods(ns).Delete(t.Context(), "pod-lost", metav1.DeleteOptions{}))
	n.WaitGone(ns, "pod-lost")
	// Stopped but still listed: its DEL may still come, so a few passes
	// leave it alone.
	time.Sleep(3 * time.Second)
	if len(n.Sandboxes(lost, "notready")) == 1 {
		if !fileExists(recordPath(w, lostSB.ID)) {
			t.Fatalf("the record of stopped sandbox %s, which the runtime still lists, was collected", lostSB.ID)
		}
		if leases := leasesOf(t, w, lostSB.ID); len(leases) != 1 {
			t.Fatalf("stopped sandbox %s holds leases %v, want blue's alone (the default network's went with its DEL)", lostSB.ID, leases)
		}
	} else {
		t.Log("kubelet removed the stopped sandbox itself: its check is skipped")
	}
	n.RemoveSandboxes(lost)
	n.InstallPlexus(w)

	deadline := time.Now().Add(gcWait)
	for fileExists(recordPath(w, lostSB.ID)) {
		if time.Now().After(deadline) {
			t.Fatalf("the record of lost sandbox %s is still there after %s", lostSB.ID, gcWait)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if leases := leasesOf(t, w, lostSB.ID); len(leases) != 0 {
		t.Errorf("leases of the collected sandbox left: %v", leases)
	}
	if fileExists(filepath.Join(w.CacheDir, "locks", lostSB.ID+".lock")) {
		t.Error("the collected sandbox's lock file is left")
	}
	if got := d.Metric("plexus_gc_collected_containers_total"); got != 1 {
		t.Errorf("plexus_gc_collected_containers_total = %v, want 1", got)
	}
	if log := d.Log(); !strings.Contains(log, lostSB.ID) || !strings.Contains(log, ns+"/pod-lost") {
		t.Errorf("plexusd's log names neither the collected container nor its pod")
	}

	// The running pod: its record, network-status and interfaces stay.
	if !fileExists(recordPath(w, keepSB.ID)) {
		t.Fatalf("the running pod's record %s was collected", keepSB.ID)
	}
	if got := n.GetPod(ns, "pod-keep").Annotations[StatusAnnotation]; got != keepStatus {
		t.Errorf("the running pod's network-status changed:\nbefore %s\nafter  %s", keepStatus, got)
	}
	assertAttached(t, n, keep, blueOnly(ns))
	n.DeletePod(ns, "pod-keep")
	assertCleanedUp(t, w, before, keepSB.ID)
}

func recordPath(w *harness.World, id string) string {
	return filepath.Join(w.CacheDir, "records", id+".json")
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// leasesOf lists the host-local leases under w's IPAM directory that name
// the container (a lease file holds the container ID and interface).
func leasesOf(t *testing.T, w *harness.World, id string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(w.IPAMDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if b, _ := os.ReadFile(p); strings.Contains(string(b), id) {
			out = append(out, p+": "+strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " "))
		}
		return nil
	})
	return out
}
