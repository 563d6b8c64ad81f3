package faults

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
)

// waitBound bounds every wait for a delegate to show up; it is a bound,
// never a measured result.
const waitBound = 30 * time.Second

// exitBound bounds the wait for a released or killed delegate to end.
const exitBound = 10 * time.Second

// fault is one badplugin configuration with the files it talks through.
type fault struct {
	Mode, DelMode string
	Marker        string
	Release       string
}

func newFault(t *testing.T, mode, delMode string) *fault {
	d := t.TempDir()
	return &fault{Mode: mode, DelMode: delMode, Marker: filepath.Join(d, "marker"), Release: filepath.Join(d, "release")}
}

func (f *fault) plugin() map[string]any {
	return map[string]any{"type": "badplugin", "mode": f.Mode, "delMode": f.DelMode, "markerFile": f.Marker, "releaseFile": f.Release}
}

// conflist is a real bridge with host-local IPAM followed by badplugin, so
// the bridge has really attached when badplugin misbehaves.
func conflist(h *harness.World, name string, f *fault) string {
	plugins := []any{map[string]any{
		"type": "bridge", "bridge": h.Bridge(), "isGateway": true,
		"ipam": map[string]any{"type": "host-local", "subnet": harness.Subnet(), "dataDir": h.IPAMDir},
	}}
	if f != nil {
		plugins = append(plugins, f.plugin())
	}
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": name, "plugins": plugins})
	return string(b)
}

// faultyNAD writes a NAD whose conflist ends with badplugin.
func faultyNAD(h *harness.World, namespace, name string, f *fault) {
	h.NAD(namespace, name, conflist(h, name, f))
}

// faultyDefault makes the cluster-wide default network (s6) end with
// badplugin.
func faultyDefault(h *harness.World, f *fault) {
	path := filepath.Join(h.Dir, "faulty-default.conflist")
	h.WriteFile(path, conflist(h, "cluster-default", f))
	h.Set("clusterNetwork", path)
}

// released lets every blocked badplugin go on.
func (f *fault) release(t *testing.T) {
	harness.Must(t, os.WriteFile(f.Release, nil, 0o644))
}

// waitFor waits until badplugin has started cmd (ADD or DEL) n times.
func (f *fault) waitFor(t *testing.T, cmd string, n int) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(f.Marker)
		if strings.Count(string(b), cmd+" ") >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("badplugin did not start %s within %s", cmd, waitBound)
}

// waitNoProcess waits for the World's processes to end (a released
// orphan finishes on its own), then asserts none is left.
func waitNoProcess(t *testing.T, h *harness.World) {
	t.Helper()
	deadline := time.Now().Add(exitBound)
	for time.Now().Before(deadline) && len(h.StrayProcesses()) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	h.AssertNoStrayProcesses()
}

// assertClean is the leak check after every scenario: no interface in the
// sandbox, and AssertNoLeaks on the host (veths, leases, records, locks,
// libcni cache), and no process left.
func assertClean(t *testing.T, h *harness.World, c *harness.Container, before map[string]bool) {
	t.Helper()
	h.AssertDetached(c, before)
	waitNoProcess(t, h)
}

// assertCleanThroughDel checks that a failed call (after) left nothing,
// that a DEL afterwards succeeds (s7.2), and that it leaves nothing either.
func assertCleanThroughDel(t *testing.T, h *harness.World, c *harness.Container, before map[string]bool, after string) {
	t.Helper()
	assertClean(t, h, c, before)
	delClean(t, h, c, before, "DEL after the "+after)
}

// delClean runs a DEL that must succeed (what names it, as in MustPlugin)
// and checks that nothing is left (assertClean).
func delClean(t *testing.T, h *harness.World, c *harness.Container, before map[string]bool, what string) {
	t.Helper()
	h.MustPlugin(c, "DEL", what)
	assertClean(t, h, c, before)
}

// assertCNIError checks the code and that the message names every want.
func assertCNIError(t *testing.T, e *harness.CNIError, code uint, want ...string) {
	t.Helper()
	harness.AssertCNIError(t, e, code, want...)
}
