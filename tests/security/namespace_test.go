package security

import (
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// crossNamespace are the ways a pod can name a NAD in another namespace:
// the s4.1.1 "namespace/name" text form and the s4.1.2 JSON form's
// "namespace" key, with or without other keys.
func crossNamespace() map[string]string {
	return map[string]string{
		"text":                "other/net-b",
		"json":                `[{"name":"net-b","namespace":"other"}]`,
		"json with interface": `[{"name":"net-b","namespace":"other","interface":"ext0"}]`,
	}
}

// TestCrossNamespaceWithoutPolicyIsAllowed documents the spec's default:
// without a policy (s7.4 leaves access control to the implementation), any
// pod may use any NAD in any namespace.
func TestCrossNamespaceWithoutPolicyIsAllowed(t *testing.T) {
	for form, ann := range crossNamespace() {
		t.Run(form, func(t *testing.T) {
			h := harness.New(t)
			h.BridgeNAD("other", "net-b")
			h.Pod("demo", "web", ann)
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			h.AddDel(c, before, 2, "the default and other/net-b")
		})
	}
}

// TestCrossNamespaceDeniedByIsolation: with the shipped namespace
// isolation policy, every form of cross-namespace selection is denied
// before any delegate runs (code 102, naming the rule).
func TestCrossNamespaceDeniedByIsolation(t *testing.T) {
	for form, ann := range crossNamespace() {
		t.Run(form, func(t *testing.T) {
			h := harness.New(t)
			h.UseLibraryPolicy("admin.yaml", "plexus:\n  config:\n    namespace_isolation:\n      enabled: true\n")
			h.BridgeNAD("other", "net-b")
			h.Pod("demo", "web", ann)
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			h.AddRefused(c, before, 102, "pod demo/web", "other/net-b", "[namespace-isolation]")
		})
	}
}
