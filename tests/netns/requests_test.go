package netns

import (
	"encoding/json"

	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// staticNAD is a bridge network whose IPAM is the static plugin, which
// honors the "ips" capability.
func (h *harness) staticNAD(namespace, name string) {
	h.nad(namespace, name, `{"cniVersion":"1.0.0","name":"`+name+`","plugins":[
	  {"type":"bridge","bridge":"`+h.bridge()+`","ipam":{"type":"static"},"capabilities":{"ips":true}}]}`)
}

// tuningNAD chains tuning (which honors the "mac" capability) after bridge.
func (h *harness) tuningNAD(namespace, name string) {
	h.nad(namespace, name, `{"cniVersion":"1.0.0","name":"`+name+`","plugins":[
	  {"type":"bridge","bridge":"`+h.bridge()+`","ipam":{"type":"host-local","subnet":"`+subnet()+`","dataDir":"`+h.ipamDir+`"}},
	  {"type":"tuning","capabilities":{"mac":true}}]}`)
}

func TestS4_1_2_1_3IPsHonored(t *testing.T) {
	h := newHarness(t)
	h.staticNAD("demo", "static-net")
	h.pod("demo", "web", `[{"name":"static-net","ips":["192.168.77.10/24","fd00:77::10/64"]}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	got := c.addrs(t, "net1")
	if want := []string{"192.168.77.10/24", "fd00:77::10/64"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("net1 addresses %v, want %v", got, want)
	}
	st := h.status("demo", "web")
	if !reflect.DeepEqual(st[1].IPs, []string{"192.168.77.10/24", "fd00:77::10/64"}) {
		t.Errorf("status ips %v", st[1].IPs)
	}
	h.del(c)
	h.assertNoLeaks(before)
}

func TestS4_1_2_1_3IPsNotHonoredFailsAndLeavesNothing(t *testing.T) {
	h := newHarness(t)
	// host-local can only hand out addresses of its own range.
	h.bridgeNAD("demo", "dyn")
	h.pod("demo", "web", `[{"name":"dyn","ips":["10.250.0.99"]}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	_, e := h.plugin(c, "ADD")
	if e == nil || (e.Code != 104 && e.Code != 105) || !strings.Contains(e.Msg, "10.250.0.99") || !strings.Contains(e.Msg, "demo/dyn (net1)") {
		t.Fatalf("want the ADD to fail naming the IP and network, got %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("interfaces left after a failed ADD: %v", got)
	}
	h.assertNoLeaks(before)
	// The runtime follows a failed ADD with DEL; it must succeed.
	if _, e := h.plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL after failed ADD: %+v", e)
	}
	h.assertNoLeaks(before)
}

func TestS4_1_2_1_4MACHonored(t *testing.T) {
	h := newHarness(t)
	h.tuningNAD("demo", "tuned")
	h.pod("demo", "web", `[{"name":"tuned","mac":"02:42:ac:11:00:99"}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	if mac := c.links(t)["net1"].Attrs().HardwareAddr.String(); mac != "02:42:ac:11:00:99" {
		t.Fatalf("net1 MAC %s", mac)
	}
	if st := h.status("demo", "web"); st[1].MAC != "02:42:ac:11:00:99" {
		t.Errorf("status mac %s", st[1].MAC)
	}
	h.del(c)
	h.assertNoLeaks(before)
}

func TestS4_1_2_1_4MACNotHonoredFails(t *testing.T) {
	h := newHarness(t)
	// ptp ignores the mac argument: plexus must notice (s4.1.2.1.4.2).
	h.nad("demo", "plain", `{"cniVersion":"1.0.0","name":"plain","type":"ptp","ipam":{"type":"host-local","subnet":"`+subnet()+`","dataDir":"`+h.ipamDir+`"}}`)
	h.pod("demo", "web", `[{"name":"plain","mac":"02:42:ac:11:00:98"}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	_, e := h.plugin(c, "ADD")
	if e == nil || e.Code != 105 || !strings.Contains(e.Msg, "02:42:ac:11:00:98") || !strings.Contains(e.Msg, "demo/plain (net1)") {
		t.Fatalf("want code 105 naming the MAC, got %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("interfaces left: %v", got)
	}
	h.assertNoLeaks(before)
}

// TestS7_2FailingMiddleAttachment: the second of three selections fails;
// the first and the default are undone, the third is never invoked.
func TestS7_2FailingMiddleAttachment(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "first")
	h.nad("demo", "broken", `{"cniVersion":"1.0.0","name":"broken","type":"macvlan","master":"no-such-dev0","ipam":{"type":"host-local","subnet":"`+subnet()+`","dataDir":"`+h.ipamDir+`"}}`)
	thirdDir := filepath.Join(h.dir, "third-ipam")
	h.nad("demo", "third", `{"cniVersion":"1.0.0","name":"third","type":"bridge","bridge":"`+h.bridge()+`","ipam":{"type":"host-local","subnet":"`+subnet()+`","dataDir":"`+thirdDir+`"}}`)
	h.pod("demo", "web", "first,broken,third")
	c := h.container("demo", "web")
	before := hostVeths(t)

	_, e := h.plugin(c, "ADD")
	if e == nil || e.Code != 104 || !strings.Contains(e.Msg, "demo/broken (net2)") || !strings.Contains(e.Msg, "macvlan") {
		t.Fatalf("want code 104 naming the failed network and the cause, got %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("interfaces left after the failure: %v", got)
	}
	if _, err := os.Stat(thirdDir); !os.IsNotExist(err) {
		t.Error("the attachment after the failed one was invoked (its IPAM dir exists)")
	}
	h.assertNoLeaks(before)
	if _, e := h.plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL after the failed ADD: %+v", e)
	}
	h.assertNoLeaks(before)
}

func TestDelAfterPodGoneAndDoubleDel(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", "net-a")
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	// The pod and its NAD disappear, the NAD's network would now resolve
	// differently: DEL works from the record.
	h.removePod("demo", "web")
	must(t, os.Remove(filepath.Join(h.manifests, "nad-demo-net-a.yaml")))
	h.del(c)
	h.assertNoLeaks(before)
	h.del(c)
	h.assertNoLeaks(before)
}

func TestDelWithUnreachableKubernetesSource(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", "net-a")
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	// Switch to a Kubernetes source that cannot be reached: DEL never needs the API.
	kc := filepath.Join(h.dir, "kubeconfig")
	h.writeFile(kc, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: x}\n")
	h.set("manifests", nil)
	h.set("kubeconfig", kc)
	h.del(c)
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("interfaces left: %v", got)
	}
	h.assertNoLeaks(before)
}

func TestCheck(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", "net-a")
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	if _, err := h.cnitool(c, "check"); err != nil {
		t.Fatalf("CHECK of a healthy pod: %v", err)
	}
	// Remove the secondary interface behind plexus's back: CHECK must see it.
	must(t, c.ns.Do(func(_ ns.NetNS) error {
		l, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}))
	out, err := h.cnitool(c, "check")
	if err == nil || !strings.Contains(out, "demo/net-a (net1)") {
		t.Fatalf("CHECK must fail naming the broken attachment: %v %s", err, out)
	}
	h.del(c)
	h.assertNoLeaks(before)
}

func TestRuntimeCNIVersions(t *testing.T) {
	for _, v := range []string{"0.3.1", "1.0.0"} {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			h.bridgeNAD("demo", "net-a")
			h.pod("demo", "web", "net-a")
			h.set("cniVersion", v)
			c := h.container("demo", "web")
			before := hostVeths(t)
			out := h.add(c)
			var res map[string]any
			must(t, json.Unmarshal([]byte(out), &res))
			if res["cniVersion"] != v {
				t.Errorf("result version %v, want %s: %s", res["cniVersion"], v, out)
			}
			ips, _ := res["ips"].([]any)
			if len(ips) == 0 {
				t.Fatalf("no ips in %s", out)
			}
			_, hasVersion := ips[0].(map[string]any)["version"]
			if hasVersion != (v == "0.3.1") {
				t.Errorf("ips[0] of a %s result: %v", v, ips[0])
			}
			if len(h.status("demo", "web")) != 2 {
				t.Error("status incomplete")
			}
			h.del(c)
			h.assertNoLeaks(before)
		})
	}
}

// TestCapabilitiesReachDefaultNetwork: kubelet's runtimeConfig for a
// capability plexus declares reaches the default network's delegates
// (bandwidth shapes the host veth).
func TestCapabilitiesReachDefaultNetwork(t *testing.T) {
	h := newHarness(t)
	h.set("capabilities", map[string]bool{"bandwidth": true})
	h.pod("demo", "web", "")
	c := h.container("demo", "web")
	c.env = []string{`CAP_ARGS={"bandwidth":{"ingressRate":1000000,"ingressBurst":100000,"egressRate":1000000,"egressBurst":100000}}`}
	before := hostVeths(t)
	h.add(c)
	found := false
	for v := range hostVeths(t) {
		if before[v] {
			continue
		}
		l, err := netlink.LinkByName(v)
		must(t, err)
		qs, err := netlink.QdiscList(l)
		must(t, err)
		for _, q := range qs {
			if q.Type() == "tbf" {
				found = true
			}
		}
	}
	if !found {
		t.Error("no tbf qdisc on the pod's host veth: the bandwidth runtimeConfig did not reach the delegate")
	}
	h.del(c)
	h.assertNoLeaks(before)
}
