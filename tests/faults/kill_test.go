package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestPlexusKilledBetweenAttachments: the runtime SIGKILLs plexus (as
// libcni's exec does when its context ends) while the third of four
// attachments is in its delegate. The record written before each delegate
// starts (s7.2) lets the next DEL undo all three attachments made so far,
// including the one whose delegate finished after plexus died.
func TestPlexusKilledBetweenAttachments(t *testing.T) {
	f := newFault(t, "block", "ok")
	h, c := faultWorld(t, positions()[2], f) // n1, bad (blocks), n3
	before := harness.HostVeths(t)
	run := h.StartPlugin(c, "ADD")
	f.waitFor(t, "ADD", 1)
	harness.Must(t, run.Cmd.Process.Kill())
	if _, e, err := run.Wait(); err == nil {
		t.Fatalf("plexus was killed but reported %+v", e)
	}
	if _, err := os.Stat(filepath.Join(h.CacheDir, "records", "direct-web.json")); err != nil {
		t.Fatalf("no attachment record after plexus was killed mid-ADD: %v", err)
	}
	// The orphaned delegate finishes its ADD after plexus is gone.
	f.release(t)
	waitNoProcess(t, h)
	h.AssertInterfaces(c, 3, "eth0, net1 and net2 before DEL (the killed call's attachments)")
	delClean(t, h, c, before, "DEL after plexus was killed")
}

// TestPlexusKilledWhileDelegateHangs: a runtime whose deadline passes
// SIGKILLs plexus, not its children. A hung delegate must not outlive
// plexus: it would hold its lease and netns forever. plexus execs its
// delegates with a parent-death signal (cmd/internal/cniplugin/exec.go).
func TestPlexusKilledWhileDelegateHangs(t *testing.T) {
	f := newFault(t, "hang", "ok")
	h, c := faultWorld(t, positions()[1], f)
	before := harness.HostVeths(t)
	run := h.StartPlugin(c, "ADD")
	f.waitFor(t, "ADD", 1)
	t.Cleanup(func() { killAll(h) })
	harness.Must(t, run.Cmd.Process.Kill())
	_, _, _ = run.Wait()
	waitNoProcess(t, h)
	delClean(t, h, c, before, "DEL after plexus was killed")
}

// killAll ends what a failed test left running.
func killAll(h *harness.World) {
	for _, p := range h.StrayProcesses() {
		var pid int
		if _, err := fmt.Sscanf(p, "%d ", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
