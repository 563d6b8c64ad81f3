package netns

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestDelAfterADelegateRejectsItsConfigEnds: a NAD whose delegate rejects
// its own config fails the ADD, and that delegate rejects the DEL the same
// way. The ADD's undo and every later DEL must still end: the rejecting
// plugin created nothing, the plugins before it in the list are undone
// (the bridge's veth and host-local's lease), and no record or lock stays
// behind to fail the runtime's DELs forever.
func TestDelAfterADelegateRejectsItsConfigEnds(t *testing.T) {
	tests := []struct {
		name   string
		config func(h *harness.World) string
	}{
		{"unknown cniVersion", func(h *harness.World) string {
			return `{"cniVersion":"9.9.9","name":"bad","type":"bridge","bridge":"` + h.Bridge() + `",
			  "ipam":{"type":"host-local","subnet":"` + harness.Subnet() + `","dataDir":"` + h.IPAMDir + `"}}`
		}},
		{"invalid subnet", func(h *harness.World) string {
			return `{"cniVersion":"1.0.0","name":"bad","type":"bridge","bridge":"` + h.Bridge() + `",
			  "ipam":{"type":"host-local","subnet":"10.250.0.0/99","dataDir":"` + h.IPAMDir + `"}}`
		}},
		{"second plugin of a list", func(h *harness.World) string {
			return `{"cniVersion":"1.0.0","name":"bad","plugins":[
			  {"type":"bridge","bridge":"` + h.Bridge() + `","ipam":{"type":"host-local","subnet":"` + harness.Subnet() + `","dataDir":"` + h.IPAMDir + `"}},
			  {"type":"tuning","mtu":"not a number"}]}`
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := harness.New(t)
			h.NAD("other", "bad", tt.config(h))
			h.Pod("demo", "web", "other/bad")
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			h.AddRefused(c, before, 104, "other/bad (net1)")
			h.MustPlugin(c, "DEL", "DEL after the rejected ADD")
			h.MustPlugin(c, "DEL", "the runtime's repeated DEL")
			h.AssertDetached(c, before)
		})
	}
}

// TestReservedInterfaceNameNeverReachesADelegate: "lo" (in every network
// namespace) and the kernel's "all" and "default" make the annotation
// invalid before any delegate runs, so no DEL can fail on them later.
func TestReservedInterfaceNameNeverReachesADelegate(t *testing.T) {
	for _, ann := range []string{`[{"name":"net-a","interface":"lo"}]`, `net-a@default`} {
		t.Run(ann, func(t *testing.T) {
			h := harness.New(t)
			h.BridgeNAD("demo", "net-a")
			h.Pod("demo", "web", ann)
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			h.Add(c)
			h.AssertIfNames(c, "eth0")
			h.Del(c)
			h.AssertNoLeaks(before)
		})
	}
}

// TestADDWithANetnsThatIsNotANamespaceLeavesNothing: CNI_NETNS naming a
// file that is not a network namespace fails the ADD before plexus
// records or locks anything, and DEL still ends.
func TestADDWithANetnsThatIsNotANamespaceLeavesNothing(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a")
	notNS := filepath.Join(t.TempDir(), "not-a-netns")
	harness.Must(t, os.WriteFile(notNS, nil, 0o600))
	_, e := h.PluginEdited(c, "ADD", []string{"CNI_NETNS=" + notNS}, nil)
	harness.AssertCNIError(t, e, 8, "CNI_NETNS", notNS, "not a network namespace")
	if _, e := h.PluginEdited(c, "DEL", []string{"CNI_NETNS=" + notNS}, nil); e != nil {
		t.Errorf("DEL: %+v", e)
	}
	h.AssertNoLeaks(before)
}
