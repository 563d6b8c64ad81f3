// Package security tests the claims of docs/security.md through the real
// plugin in network namespaces: what a pod author, a NAD author and a
// module author can and cannot reach.
package security

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// assertNothingAttached is the check after every refusal: the sandbox has
// no interface and the host kept nothing (veths, leases, records, locks).
func assertNothingAttached(t *testing.T, h *harness.World, c *harness.Container, before map[string]bool) {
	t.Helper()
	h.AssertDetached(c, before)
}

// assertDefaultOnly: an invalid annotation is "invalid and ignored" (s4.1)
// without strictSelection, so the pod gets the default network alone.
func assertDefaultOnly(t *testing.T, h *harness.World, c *harness.Container, before map[string]bool) {
	t.Helper()
	if got := harness.IfNames(c.Links(t)); len(got) != 1 || got[0] != "eth0" {
		t.Errorf("interfaces %v, want the default network's eth0 only", got)
	}
	if _, e := h.Plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL: %+v", e)
	}
	assertNothingAttached(t, h, c, before)
}
