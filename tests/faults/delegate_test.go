package faults

import (
	"syscall"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// position is where the misbehaving delegate sits in the pod's attachments.
type position struct {
	name string
	// selection is the pod's annotation; "bad" is the faulty NAD.
	selection string
	// label is how plexus names the failed attachment (s5.3.1 name and
	// interface).
	label string
	// defaultBad puts badplugin in the default network instead.
	defaultBad bool
}

func positions() []position {
	return []position{
		{name: "default", selection: "n1,n2,n3", label: "cluster-default (default, eth0)", defaultBad: true},
		{name: "first", selection: "bad,n2,n3", label: "demo/bad (net1)"},
		{name: "middle", selection: "n1,bad,n3", label: "demo/bad (net2)"},
		{name: "last", selection: "n1,n2,bad", label: "demo/bad (net3)"},
	}
}

// faultWorld sets up a pod demo/web with three good secondary networks and
// a faulty one at the position's place.
func faultWorld(t *testing.T, pos position, f *fault) (*harness.World, *harness.Container) {
	h := harness.New(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		h.BridgeNAD("demo", n)
	}
	if pos.defaultBad {
		faultyDefault(h, f)
	} else {
		faultyNAD(h, "demo", "bad", f)
	}
	h.Pod("demo", "web", pos.selection)
	return h, h.Container("demo", "web")
}

// TestFaultToolWorks is the control: badplugin in "ok" mode at every
// position attaches like any chained plugin, so the failures below are the
// faults' doing and nothing else's.
func TestFaultToolWorks(t *testing.T) {
	for _, pos := range positions() {
		t.Run(pos.name, func(t *testing.T) {
			f := newFault(t, "ok", "ok")
			h, c := faultWorld(t, pos, f)
			before := harness.HostVeths(t)
			h.MustPlugin(c, "ADD", "ADD with badplugin in ok mode")
			h.AssertInterfaces(c, 4, "eth0 and net1-3")
			delClean(t, h, c, before, "")
		})
	}
}

// TestDelegateCrashOrGarbage: a delegate that crashes or prints garbage at
// any position fails the ADD with code 104 naming the pod and network;
// everything attached before it, and the bridge of its own conflist, is
// undone (s7.2), and a DEL afterwards succeeds.
func TestDelegateCrashOrGarbage(t *testing.T) {
	modes := []struct{ mode, cause string }{
		{"crash", "badplugin: crash requested"},
		{"garbage", "failed to unmarshal raw result"},
	}
	for _, m := range modes {
		for _, pos := range positions() {
			t.Run(m.mode+"/"+pos.name, func(t *testing.T) {
				f := newFault(t, m.mode, "ok")
				h, c := faultWorld(t, pos, f)
				before := harness.HostVeths(t)
				_, e := h.Plugin(c, "ADD")
				assertCNIError(t, e, 104, "pod demo/web", pos.label, `plugin type="badplugin" failed (add)`, m.cause)
				assertCleanThroughDel(t, h, c, before, "failed ADD")
			})
		}
	}
}

// TestDelegateHangCancelledBySIGTERM: what bounds a hanging delegate today
// is plexus's whole-call timeout (3 minutes) or the runtime cancelling the
// call. SIGTERM cancels plexus's context: the hung delegate is killed, the
// attachments are undone with a fresh teardown budget, and the error names
// the stuck network.
func TestDelegateHangCancelledBySIGTERM(t *testing.T) {
	for _, pos := range positions() {
		t.Run(pos.name, func(t *testing.T) {
			f := newFault(t, "hang", "ok")
			h, c := faultWorld(t, pos, f)
			before := harness.HostVeths(t)
			run := h.StartPlugin(c, "ADD")
			f.waitFor(t, "ADD", 1)
			harness.Must(t, run.Cmd.Process.Signal(syscall.SIGTERM))
			_, e, err := run.Wait()
			harness.Must(t, err)
			assertCNIError(t, e, 104, "pod demo/web", pos.label, `plugin type="badplugin"`)
			t.Logf("error after SIGTERM: %s", e.Msg)
			assertCleanThroughDel(t, h, c, before, "cancelled ADD")
		})
	}
}

// TestDelegateHangBoundedByDelegateTimeout: with a per-delegate bound
// ("delegateTimeout"), a hung
// delegate is killed by plexus itself, before the runtime's own deadline
// kills plexus (which would leave no rollback, see kill_test.go), and the
// error names the network, the plugin and the bound.
func TestDelegateHangBoundedByDelegateTimeout(t *testing.T) {
	for _, pos := range positions() {
		t.Run(pos.name, func(t *testing.T) {
			f := newFault(t, "hang", "ok")
			h, c := faultWorld(t, pos, f)
			h.Set("delegateTimeout", "1s")
			before := harness.HostVeths(t)
			_, e := h.Plugin(c, "ADD")
			assertCNIError(t, e, 104, "pod demo/web", pos.label, `plugin type="badplugin"`, "delegateTimeout 1s")
			assertCleanThroughDel(t, h, c, before, "timed-out ADD")
		})
	}
}
