package netns

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestS7_4PolicyDenialLeavesNothing: with namespace isolation enabled, a
// cross-namespace selection fails the ADD before any delegate runs, naming
// the pod, the network and the rule; a same-namespace one attaches.
func TestS7_4PolicyDenialLeavesNothing(t *testing.T) {
	h := harness.New(t)
	h.UseLibraryPolicy("admin.yaml", "plexus:\n  config:\n    namespace_isolation:\n      enabled: true\n      global_namespaces: [shared]\n")
	h.BridgeNAD("demo", "net-a")
	h.BridgeNAD("other", "net-b")
	h.BridgeNAD("shared", "net-s")

	h.Pod("demo", "denied", "net-a,other/net-b")
	c := h.Container("demo", "denied")
	before := harness.HostVeths(t)
	h.AddRefused(c, before, 102, "pod demo/denied", "other/net-b", "[namespace-isolation]")

	h.Pod("demo", "allowed", "net-a,shared/net-s")
	ok := h.Container("demo", "allowed")
	h.Add(ok)
	h.AssertInterfaces(ok, 3, "3 in the allowed pod")
	h.Del(ok)
	h.AssertNoLeaks(before)
}

// extensionsDir holds the example modules make build produces.
func extensionsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.Getenv("PLEXUS_BIN"), "extensions")
	if _, err := os.Stat(filepath.Join(dir, "vlan.wasm")); err != nil {
		if os.Getenv("PLEXUS_E2E") == "1" {
			t.Fatalf("extension modules missing in %s (make build makes them): %v", dir, err)
		}
		t.Skip("extension modules not built; run make test")
	}
	return dir
}

// TestExtensionOverridesAppliedAndStatusEnriched: io.plexus.overrides sets
// an allowed top-level delegate key (the bridge's "mtu"), which the kernel
// then shows on the pod's interface; the enricher adds its reverse-domain
// key to the status (s5.3); a key outside the allow list is rejected.
func TestExtensionOverridesAppliedAndStatusEnriched(t *testing.T) {
	dir := extensionsDir(t)
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{
		map[string]any{"path": filepath.Join(dir, "overrides.wasm"), "config": map[string]any{"allow": []string{"mtu"}}},
		map[string]any{"path": filepath.Join(dir, "enricher.wasm")},
	}})
	h.BridgeNAD("demo", "jumbo")
	h.Pod("demo", "web", `[{"name":"jumbo","io.plexus.overrides":{"mtu":1280}}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	if mtu := c.Links(t)["net1"].Attrs().MTU; mtu != 1280 {
		t.Errorf("net1 MTU %d, want 1280 from the override", mtu)
	}
	raw, err := os.ReadFile(filepath.Join(h.Manifests, "status", "demo_web.json"))
	harness.Must(t, err)
	var st []map[string]json.RawMessage
	harness.Must(t, json.Unmarshal(raw, &st))
	if gw := string(st[1]["io.plexus.status.gateways"]); !strings.Contains(gw, ".1") {
		t.Errorf("enriched status lacks the gateway: %s", raw)
	}
	h.Del(c)
	h.AssertNoLeaks(before)

	h.Pod("demo", "bad", `[{"name":"jumbo","io.plexus.overrides":{"bridge":"hijack0"}}]`)
	bad := h.Container("demo", "bad")
	h.AddRefused(bad, before, 103, "bridge", "demo/jumbo")
}

// TestExtensionVLANAppliedInKernel: com.example.vlan becomes the vlan
// plugin's "vlanId", read back from the kernel. Kernels without 802.1Q
// (this project's CI machine) cannot run it.
func TestExtensionVLANAppliedInKernel(t *testing.T) {
	dir := extensionsDir(t)
	master := vlanCapableMaster(t)
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{map[string]any{"path": filepath.Join(dir, "vlan.wasm")}}})
	h.NAD("demo", "trunk", `{"cniVersion":"1.0.0","name":"trunk","type":"vlan","master":"`+master+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+h.IPAMDir+`"}}`)
	h.Pod("demo", "web", `[{"name":"trunk","com.example.vlan":123}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	if id := vlanID(t, c, "net1"); id != 123 {
		t.Errorf("net1 has VLAN id %d, want 123", id)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// TestExtensionVLANRejectsOutOfRange works on any kernel: the module's
// rejection fails the ADD before any delegate runs.
func TestExtensionVLANRejectsOutOfRange(t *testing.T) {
	dir := extensionsDir(t)
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{map[string]any{"path": filepath.Join(dir, "vlan.wasm")}}})
	h.BridgeNAD("demo", "trunk")
	h.Pod("demo", "bad", `[{"name":"trunk","com.example.vlan":5000}]`)
	bad := h.Container("demo", "bad")
	before := harness.HostVeths(t)
	h.AddRefused(bad, before, 103, "5000")
}

// vlanCapableMaster creates a veth to carry VLANs, skipping the test when
// the kernel has no 802.1Q support.
func vlanCapableMaster(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("pxm%d", os.Getpid()%100000)
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	harness.Must(t, netlink.LinkAdd(v))
	t.Cleanup(func() { _ = netlink.LinkDel(v) })
	harness.Must(t, netlink.LinkSetUp(v))
	probe := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name + ".9", ParentIndex: mustIndex(t, name)}, VlanId: 9}
	if err := netlink.LinkAdd(probe); err != nil {
		t.Skipf("this kernel cannot create 802.1Q interfaces (%v); the VLAN read-back needs one", err)
	}
	_ = netlink.LinkDel(probe)
	return name
}

func mustIndex(t *testing.T, name string) int {
	l, err := netlink.LinkByName(name)
	harness.Must(t, err)
	return l.Attrs().Index
}

// vlanID reads the VLAN id of a vlan interface in the container.
func vlanID(t *testing.T, c *harness.Container, ifName string) int {
	t.Helper()
	id := -1
	harness.Must(t, c.NS.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		if v, ok := l.(*netlink.Vlan); ok {
			id = v.VlanId
		}
		return nil
	}))
	return id
}
