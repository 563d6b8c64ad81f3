package thick

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestThickMultusKeys: plexusd applies Multus's keys as the plugin does
// (default-route changes the pod's route from plexusd, which runs no
// delegate in the pod's namespace itself), and counts what it ignored by
// key: a capability no plugin declares, and an unknown reserved key.
func TestThickMultusKeys(t *testing.T) {
	w := harness.New(t)
	d := w.StartDaemon()
	subnet := harness.Subnet()
	var a, b int
	_, _ = fmt.Sscanf(subnet, "10.%d.%d.0/24", &a, &b)
	gw := fmt.Sprintf("10.%d.%d.1", a, b)
	w.NAD("demo", "uplink", `{"cniVersion":"1.0.0","name":"uplink","type":"bridge","bridge":"`+w.Bridge()+`","isGateway":true,
	  "ipam":{"type":"host-local","subnet":"`+subnet+`","dataDir":"`+w.IPAMDir+`"}}`)
	w.Pod("demo", "web", `[{"name":"uplink","interface":"up0","default-route":["`+gw+`"],"bandwidth":{"egressRate":1000000,"egressBurst":100000},"color":"red"}]`)
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	w.Add(c)
	var routes []string
	harness.Must(t, c.NS.Do(func(ns.NetNS) error {
		rs, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		for _, r := range rs {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				routes = append(routes, r.Gw.String())
			}
		}
		return err
	}))
	if len(routes) != 1 || routes[0] != gw {
		t.Errorf("pod's IPv4 default routes via %v, want only %s", routes, gw)
	}
	if n := d.Metric("plexus_selection_ignored_keys_total", `key="bandwidth"`); n != 1 {
		t.Errorf("ignored bandwidth = %v, want 1", n)
	}
	if n := d.Metric("plexus_selection_ignored_keys_total", `key="other"`); n != 1 {
		t.Errorf("ignored other (\"color\") = %v, want 1", n)
	}
	if n := d.Metric("plexus_selection_ignored_keys_total", `key="default-route"`); n != 0 {
		t.Errorf("default-route was applied, yet counted as ignored %v times", n)
	}
	st := w.Status("demo", "web")
	if len(st) != 2 || st[1].Interface != "up0" || !strings.HasPrefix(st[1].IPs[0], fmt.Sprintf("10.%d.%d.", a, b)) {
		t.Errorf("status %+v", st)
	}
	w.Del(c)
	w.AssertNoLeaks(before)
}
