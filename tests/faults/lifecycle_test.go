package faults

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/testutils"

	"github.com/plexus-cni/plexus/tests/harness"
)

// leases lists the host-local leases one network holds (host-local keeps
// a file per address under <dataDir>/<network name>/).
func leases(t *testing.T, h *harness.World, network string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(h.IPAMDir, network))
	if os.IsNotExist(err) {
		return nil
	}
	harness.Must(t, err)
	var out []string
	for _, e := range entries {
		if e.Name() != "lock" && !e.IsDir() && !strings.HasPrefix(e.Name(), "last_reserved_ip") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestAddTwiceWithNewSelectionViaCNITool: the runtime repeats ADD for the
// same sandbox after the pod's selection changed. The second ADD replaces
// the first's attachments: the old networks' interfaces and leases are
// gone, the new selection is attached, and status shows only it (s5).
func TestAddTwiceWithNewSelectionViaCNITool(t *testing.T) {
	h := harness.New(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		h.BridgeNAD("demo", n)
	}
	h.Pod("demo", "web", "n1,n2")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	h.Pod("demo", "web", `[{"name":"n3","interface":"ext0"}]`)
	h.Add(c)
	if got, want := harness.IfNames(c.Links(t)), []string{"eth0", "ext0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("interfaces after the second ADD %v, want %v", got, want)
	}
	for _, n := range []string{"n1", "n2"} {
		if l := leases(t, h, n); len(l) != 0 {
			t.Errorf("network %s still holds leases %v after it was deselected", n, l)
		}
	}
	if l := leases(t, h, "n3"); len(l) != 1 {
		t.Errorf("network n3 holds leases %v, want one", l)
	}
	var names []string
	for _, e := range h.Status("demo", "web") {
		names = append(names, e.Name+"="+e.Interface)
	}
	if want := []string{"cluster-default=eth0", "demo/n3=ext0"}; !reflect.DeepEqual(names, want) {
		t.Errorf("status %v, want %v", names, want)
	}
	h.Del(c)
	assertClean(t, h, c, before)
}

// TestDelBeforeAddThenTwiceViaCNITool: a runtime may DEL a sandbox it
// never ADDed (a failed create) and DEL twice; each DEL succeeds and the
// ADD in between is unaffected.
func TestDelBeforeAddThenTwiceViaCNITool(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "n1", "n1")
	h.Del(c)
	assertClean(t, h, c, before)
	h.Add(c)
	h.AssertInterfaces(c, 3, "eth0, net1, net2")
	h.Del(c)
	h.Del(c)
	assertClean(t, h, c, before)
}

// TestDelOfUnknownPodAndContainer: DEL for a container plexus never saw,
// of a pod that does not exist, succeeds without touching anything.
func TestDelOfUnknownPodAndContainer(t *testing.T) {
	h := harness.New(t)
	c := h.Container("nowhere", "nobody")
	before := harness.HostVeths(t)
	delClean(t, h, c, before, "DEL of an unknown pod's container")
}

// TestRetryAfterFailedAdd: after an ADD failed and was undone, the
// runtime's retry (the NAD fixed meanwhile) attaches everything once.
func TestRetryAfterFailedAdd(t *testing.T) {
	f := newFault(t, "crash", "ok")
	h, c := faultWorld(t, positions()[2], f)
	before := harness.HostVeths(t)
	_, e := h.Plugin(c, "ADD")
	assertCNIError(t, e, 104, "demo/bad (net2)")
	f.Mode = "ok"
	faultyNAD(h, "demo", "bad", f)
	h.MustPlugin(c, "ADD", "retried ADD")
	h.AssertInterfaces(c, 4, "eth0 and net1-3")
	if n := len(harness.HostVeths(t)) - len(before); n != 4 {
		t.Errorf("%d new host veths, want 4", n)
	}
	delClean(t, h, c, before, "")
}

// TestDelAfterSandboxGone: the runtime destroyed the sandbox's netns
// before DEL (its path no longer exists). DEL must still release every
// lease and succeed; the kernel removed the veths with the namespace.
func TestDelAfterSandboxGone(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "n1", "n2")
	h.MustPlugin(c, "ADD", "")
	harness.Must(t, c.NS.Close())
	harness.Must(t, testutils.UnmountNS(c.NS))
	h.MustPlugin(c, "DEL", "DEL after the netns was destroyed")
	// The kernel removes a dead namespace's veths asynchronously.
	deadline := time.Now().Add(exitBound)
	for time.Now().Before(deadline) && len(h.NewVeths(before)) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	h.AssertNoLeaks(before)
	waitNoProcess(t, h)
}
