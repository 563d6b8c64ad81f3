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
	h.AssertIfNames(c, "eth0")
	h.DelDetached(c, before, "")
}

// eachStrictness runs f with strictSelection on and off, each in a World
// of its own holding the bridge NAD demo/net-a and the pod demo/web
// selecting ann.
func eachStrictness(t *testing.T, name, ann string, f func(t *testing.T, h *harness.World, c *harness.Container, strict bool)) {
	for _, strict := range []bool{true, false} {
		t.Run(name+map[bool]string{true: "/strict", false: "/lenient"}[strict], func(t *testing.T) {
			h := harness.New(t)
			h.Set("strictSelection", strict)
			h.BridgeNAD("demo", "net-a")
			h.Pod("demo", "web", ann)
			f(t, h, h.Container("demo", "web"), strict)
		})
	}
}
