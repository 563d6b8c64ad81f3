package netns

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/plexus-cni/plexus/tests/harness"
)

// dualStack is a bridge network with host-local IPv4 and IPv6 ranges; the
// bridge holds both gateways (isGateway). With defaultRoutes the pod gets
// default routes of both families via them, as a cluster network does.
type dualStack struct {
	conf     string
	gw4, gw6 string
}

func newDualStack(h *harness.World, name string, defaultRoutes bool, extra ...map[string]any) dualStack {
	v4 := harness.Subnet()
	var a, b int
	_, _ = fmt.Sscanf(v4, "10.%d.%d.0/24", &a, &b)
	v6 := fmt.Sprintf("fd10:%d:%d::/64", a, b)
	ipam := map[string]any{"type": "host-local", "dataDir": h.IPAMDir,
		"ranges": []any{[]any{map[string]any{"subnet": v4}}, []any{map[string]any{"subnet": v6}}}}
	if defaultRoutes {
		ipam["routes"] = []any{map[string]any{"dst": "0.0.0.0/0"}, map[string]any{"dst": "::/0"}}
	}
	plugins := []any{map[string]any{"type": "bridge", "bridge": h.Bridge(), "isGateway": true, "ipam": ipam}}
	for _, p := range extra {
		plugins = append(plugins, p)
	}
	b2, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": name, "plugins": plugins})
	return dualStack{conf: string(b2), gw4: fmt.Sprintf("10.%d.%d.1", a, b), gw6: fmt.Sprintf("fd10:%d:%d::1", a, b)}
}

// TestCompatDefaultRouteReplacesThePodsDefaultRoute: "default-route" moves
// the pod's IPv4 and IPv6 default routes from the cluster network (eth0) to
// the selected attachment's gateways, in the pod's namespace itself; the
// status entry says so, "default" stays the cluster network's (s5.3.5);
// CHECK still passes and DEL leaves nothing.
func TestCompatDefaultRouteReplacesThePodsDefaultRoute(t *testing.T) {
	h := harness.New(t)
	def := newDualStack(h, "cluster-default", true)
	h.WriteFile(filepath.Join(h.Dir, "default.conflist"), def.conf)
	sec := newDualStack(h, "uplink", false)
	h.NAD("demo", "uplink", sec.conf)
	h.BridgeNAD("demo", "side")

	// Before: the cluster network's routes.
	h.Pod("demo", "plain", "side")
	plain := h.Container("demo", "plain")
	before := harness.HostVeths(t)
	h.Add(plain)
	if got := plain.DefaultRoutes(t, netlink.FAMILY_V4); len(got) != 1 || got[0] != "via "+def.gw4+" dev eth0" {
		t.Fatalf("without default-route the IPv4 default is %v, want via %s dev eth0", got, def.gw4)
	}
	h.Del(plain)

	h.Pod("demo", "web", `[{"name":"side"},{"name":"uplink","interface":"up0","default-route":["`+sec.gw4+`","`+sec.gw6+`"]}]`)
	c := h.Container("demo", "web")
	h.Add(c)
	for _, tc := range []struct {
		family int
		want   string
	}{{netlink.FAMILY_V4, "via " + sec.gw4 + " dev up0"}, {netlink.FAMILY_V6, "via " + sec.gw6 + " dev up0"}} {
		if got := c.DefaultRoutes(t, tc.family); len(got) != 1 || got[0] != tc.want {
			t.Errorf("family %d default routes %v, want only %q", tc.family, got, tc.want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(h.Manifests, "status", "demo_web.json"))
	harness.Must(t, err)
	var st []map[string]json.RawMessage
	harness.Must(t, json.Unmarshal(raw, &st))
	if string(st[0]["default"]) != "true" || string(st[2]["default"]) != "false" {
		t.Errorf("s5.3.5: only the cluster network is default: %s", raw)
	}
	var gws []string
	_ = json.Unmarshal(st[2]["io.plexus.default-route"], &gws)
	if len(gws) != 2 || gws[0] != sec.gw4 || gws[1] != sec.gw6 {
		t.Errorf("status io.plexus.default-route = %s", st[2]["io.plexus.default-route"])
	}
	if out, err := h.CNITool(c, "check"); err != nil {
		t.Errorf("CHECK after the route change: %v %s", err, out)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// TestCompatDefaultRouteGatewayOutsideSubnetFailsAndLeavesNothing: a
// gateway in none of the attachment's subnets fails the ADD (code 116)
// after the delegates ran; everything is undone (s7.2).
func TestCompatDefaultRouteGatewayOutsideSubnetFailsAndLeavesNothing(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "uplink")
	h.Pod("demo", "web", `[{"name":"uplink","default-route":["192.0.2.1"]}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.AddRefused(c, before, 116, "demo/uplink (net1)", "192.0.2.1", "none of the attachment's subnets")
}

// TestCompatCNIArgsReachTheDelegate: cni-args land in the delegate's
// args.cni, where the tuning plugin reads "mtu" and "promisc": the pod's
// interface shows both, and only on the attachment that asked.
func TestCompatCNIArgsReachTheDelegate(t *testing.T) {
	h := harness.New(t)
	h.NAD("demo", "tuned", `{"cniVersion":"1.0.0","name":"tuned","plugins":[
	  {"type":"bridge","bridge":"`+h.Bridge()+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+h.IPAMDir+`"}},
	  {"type":"tuning"}]}`)
	h.Pod("demo", "web", `[{"name":"tuned","cni-args":{"mtu":1280,"promisc":true}},{"name":"tuned"}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	links := c.Links(t)
	if a := links["net1"].Attrs(); a.MTU != 1280 || a.Promisc != 1 {
		t.Errorf("net1 MTU %d promisc %d, want 1280 and 1 from cni-args", a.MTU, a.Promisc)
	}
	if a := links["net2"].Attrs(); a.MTU == 1280 || a.Promisc != 0 {
		t.Errorf("net2 (no cni-args) MTU %d promisc %d: another attachment's cni-args leaked", a.MTU, a.Promisc)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// TestCompatPortMappingsReachOnlyTheirAttachmentsPortmap: portMappings of
// one element become runtimeConfig for that attachment's portmap only: the
// host's DNAT rule targets that attachment's address; another attachment
// of the same network gets none; a network without the capability ignores
// the key, visibly in its status entry. DEL removes the rule.
func TestCompatPortMappingsReachOnlyTheirAttachmentsPortmap(t *testing.T) {
	removePortmapChainsAfter(t)
	h := harness.New(t)
	portmap := map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}}
	h.NAD("demo", "pm", newDualStack(h, "pm", false, portmap).conf)
	h.BridgeNAD("demo", "plain")
	hostPort := 20000 + os.Getpid()%10000
	pm := fmt.Sprintf(`"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]`, hostPort)
	h.Pod("demo", "web", `[{"name":"pm",`+pm+`},{"name":"pm"},{"name":"plain",`+pm+`}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	st := h.Status("demo", "web")
	var net1 string
	for _, a := range st[1].Addrs(t) {
		if a.Is4() {
			net1 = a.String()
		}
	}
	rules := dnatRules(t, hostPort)
	if len(rules) != 1 || !strings.Contains(rules[0], "--to-destination "+net1+":80") {
		t.Errorf("DNAT rules for port %d: %q, want one to %s:80 (net1)", hostPort, rules, net1)
	}
	raw, err := os.ReadFile(filepath.Join(h.Manifests, "status", "demo_web.json"))
	harness.Must(t, err)
	var ents []map[string]json.RawMessage
	harness.Must(t, json.Unmarshal(raw, &ents))
	if got := string(ents[3]["io.plexus.ignored"]); !strings.Contains(got, `"portMappings"`) || !strings.Contains(got, "capability") {
		t.Errorf("the plain network's status entry does not show portMappings ignored: %s", raw)
	}
	if ents[1]["io.plexus.ignored"] != nil || ents[2]["io.plexus.ignored"] != nil {
		t.Errorf("nothing was ignored for the pm attachments: %s", raw)
	}
	h.Del(c)
	if rules := dnatRules(t, hostPort); len(rules) != 0 {
		t.Errorf("DNAT rules left after DEL: %q", rules)
	}
	h.AssertNoLeaks(before)
}

// dnatRules are the host's IPv4 NAT rules DNATing hostPort.
func dnatRules(t *testing.T, hostPort int) []string {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, fmt.Sprintf("--dport %d ", hostPort)) && strings.Contains(l, "DNAT") {
			rules = append(rules, l)
		}
	}
	return rules
}

// TestCompatOffIsTheSpecAlone: with "compat": "off" a Multus comma
// reference is an invalid annotation (s4.1.1, default network only) and
// Multus keys are reserved keys, ignored and listed in the status entry.
func TestCompatOffIsTheSpecAlone(t *testing.T) {
	h := harness.New(t)
	h.Set("compat", "off")
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "comma", "net-a@eth1")
	c := h.Container("demo", "comma")
	before := harness.HostVeths(t)
	h.Add(c)
	h.AssertIfNames(c, "eth0")
	h.Del(c)

	h.Pod("demo", "json", `[{"name":"net-a","default-route":["10.0.0.1"],"cni-args":{"mtu":1280}}]`)
	j := h.Container("demo", "json")
	h.Add(j)
	h.AssertIfNames(j, "eth0", "net1")
	raw, err := os.ReadFile(filepath.Join(h.Manifests, "status", "demo_json.json"))
	harness.Must(t, err)
	var ents []map[string]map[string]string
	_ = json.Unmarshal(raw, &ents)
	ign := ents[1]["io.plexus.ignored"]
	if !strings.Contains(ign["default-route"], "compatibility is off") || !strings.Contains(ign["cni-args"], "compatibility is off") {
		t.Errorf("status does not list the ignored keys: %s", raw)
	}
	h.Del(j)
	h.AssertNoLeaks(before)
}

// TestCompatBandwidthReachesOnlyItsAttachment: "bandwidth" becomes
// runtimeConfig for that attachment's bandwidth plugin, which shapes the
// pod's ingress with a tbf qdisc on the host side of that attachment only.
func TestCompatBandwidthReachesOnlyItsAttachment(t *testing.T) {
	h := harness.New(t)
	bw := map[string]any{"type": "bandwidth", "capabilities": map[string]any{"bandwidth": true}}
	h.NAD("demo", "shaped", newDualStack(h, "shaped", false, bw).conf)
	h.Pod("demo", "web", `[{"name":"shaped","bandwidth":{"ingressRate":8000000,"ingressBurst":800000}},{"name":"shaped"}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	links := c.Links(t)
	for ifName, wantRate := range map[string]uint64{"net1": 1000000, "net2": 0} {
		host, err := netlink.LinkByIndex(links[ifName].Attrs().ParentIndex)
		harness.Must(t, err)
		qs, err := netlink.QdiscList(host)
		harness.Must(t, err)
		var rate uint64
		for _, q := range qs {
			if tbf, ok := q.(*netlink.Tbf); ok {
				rate = tbf.Rate
			}
		}
		if rate != wantRate {
			t.Errorf("%s's host veth %s: tbf rate %d bytes/s, want %d", ifName, host.Attrs().Name, rate, wantRate)
		}
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// TestCompatCNIArgsCannotRequestAddresses: host-local reads args.cni
// "ips" with encoding/json, which matches "IPs" or "ipſ" too. Such a key
// in cni-args would assign an address that no policy saw and plexus never
// verified, so it invalidates the annotation: the pod gets its default
// network only (s4.1: an invalid annotation is ignored).
func TestCompatCNIArgsCannotRequestAddresses(t *testing.T) {
	for _, key := range []string{"IPs", `ip\u017f`, "ips"} {
		t.Run(key, func(t *testing.T) {
			h := harness.New(t)
			subnet := harness.Subnet()
			h.NAD("demo", "net-a", `{"cniVersion":"1.0.0","name":"net-a","type":"bridge","bridge":"`+h.Bridge()+`",
			  "ipam":{"type":"host-local","subnet":"`+subnet+`","dataDir":"`+h.IPAMDir+`"}}`)
			wanted := strings.TrimSuffix(subnet, "0/24") + "99/24"
			h.Pod("demo", "web", `[{"name":"net-a","cni-args":{"`+key+`":["`+wanted+`"]}}]`)
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			h.Add(c)
			h.AssertIfNames(c, "eth0")
			h.Del(c)
			h.AssertNoLeaks(before)
		})
	}
}
