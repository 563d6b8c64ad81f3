package netns

import (
	"encoding/json"

	"github.com/plexus-cni/plexus/tests/harness"

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
func staticNAD(h *harness.World, namespace, name string) {
	h.NAD(namespace, name, `{"cniVersion":"1.0.0","name":"`+name+`","plugins":[
	  {"type":"bridge","bridge":"`+h.Bridge()+`","ipam":{"type":"static"},"capabilities":{"ips":true}}]}`)
}

// tuningNAD chains tuning (which honors the "mac" capability) after bridge.
func tuningNAD(h *harness.World, namespace, name string) {
	h.NAD(namespace, name, `{"cniVersion":"1.0.0","name":"`+name+`","plugins":[
	  {"type":"bridge","bridge":"`+h.Bridge()+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+h.IPAMDir+`"}},
	  {"type":"tuning","capabilities":{"mac":true}}]}`)
}

func TestS4_1_2_1_3IPsHonored(t *testing.T) {
	h := harness.New(t)
	staticNAD(h, "demo", "static-net")
	h.Pod("demo", "web", `[{"name":"static-net","ips":["192.168.77.10/24","fd00:77::10/64"]}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	got := c.Addrs(t, "net1")
	if want := []string{"192.168.77.10/24", "fd00:77::10/64"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("net1 addresses %v, want %v", got, want)
	}
	st := h.Status("demo", "web")
	if !reflect.DeepEqual(st[1].IPs, []string{"192.168.77.10", "fd00:77::10"}) {
		t.Errorf("status ips %v", st[1].IPs)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

func TestS4_1_2_1_3IPsNotHonoredFailsAndLeavesNothing(t *testing.T) {
	h := harness.New(t)
	// host-local can only hand out addresses of its own range.
	h.BridgeNAD("demo", "dyn")
	h.Pod("demo", "web", `[{"name":"dyn","ips":["10.250.0.99"]}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	_, e := h.Plugin(c, "ADD")
	if e == nil || (e.Code != 104 && e.Code != 105) || !strings.Contains(e.Msg, "10.250.0.99") || !strings.Contains(e.Msg, "demo/dyn (net1)") {
		t.Fatalf("want the ADD to fail naming the IP and network, got %+v", e)
	}
	h.AssertDetached(c, before)
	// The runtime follows a failed ADD with DEL; it must succeed.
	h.MustPlugin(c, "DEL", "DEL after failed ADD")
	h.AssertNoLeaks(before)
}

func TestS4_1_2_1_4MACHonored(t *testing.T) {
	h := harness.New(t)
	tuningNAD(h, "demo", "tuned")
	h.Pod("demo", "web", `[{"name":"tuned","mac":"02:42:ac:11:00:99"}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	if mac := c.Links(t)["net1"].Attrs().HardwareAddr.String(); mac != "02:42:ac:11:00:99" {
		t.Fatalf("net1 MAC %s", mac)
	}
	if st := h.Status("demo", "web"); st[1].MAC != "02:42:ac:11:00:99" {
		t.Errorf("status mac %s", st[1].MAC)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

func TestS4_1_2_1_4MACNotHonoredFails(t *testing.T) {
	h := harness.New(t)
	// ptp ignores the mac argument: plexus must notice (s4.1.2.1.4.2).
	h.NAD("demo", "plain", `{"cniVersion":"1.0.0","name":"plain","type":"ptp","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+h.IPAMDir+`"}}`)
	h.Pod("demo", "web", `[{"name":"plain","mac":"02:42:ac:11:00:98"}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.AddRefused(c, before, 105, "02:42:ac:11:00:98", "demo/plain (net1)")
}

// TestS7_2FailingMiddleAttachment: the second of three selections fails;
// the first and the default are undone, the third is never invoked.
func TestS7_2FailingMiddleAttachment(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "first")
	h.NAD("demo", "broken", `{"cniVersion":"1.0.0","name":"broken","type":"macvlan","master":"no-such-dev0","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+h.IPAMDir+`"}}`)
	thirdDir := filepath.Join(h.Dir, "third-ipam")
	h.NAD("demo", "third", `{"cniVersion":"1.0.0","name":"third","type":"bridge","bridge":"`+h.Bridge()+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+thirdDir+`"}}`)
	h.Pod("demo", "web", "first,broken,third")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)

	_, e := h.Plugin(c, "ADD")
	if e == nil || e.Code != 104 || !strings.Contains(e.Msg, "demo/broken (net2)") || !strings.Contains(e.Msg, "macvlan") {
		t.Fatalf("want code 104 naming the failed network and the cause, got %+v", e)
	}
	h.AssertInterfaces(c, 0, "none after the failure")
	if _, err := os.Stat(thirdDir); !os.IsNotExist(err) {
		t.Error("the attachment after the failed one was invoked (its IPAM dir exists)")
	}
	h.AssertNoLeaks(before)
	h.MustPlugin(c, "DEL", "DEL after the failed ADD")
	h.AssertNoLeaks(before)
}

func TestDelAfterPodGoneAndDoubleDel(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a")
	h.Add(c)
	// The pod and its NAD disappear, the NAD's network would now resolve
	// differently: DEL works from the record.
	h.RemovePod("demo", "web")
	harness.Must(t, os.Remove(filepath.Join(h.Manifests, "nad-demo-net-a.yaml")))
	h.Del(c)
	h.AssertNoLeaks(before)
	h.Del(c)
	h.AssertNoLeaks(before)
}

func TestDelWithUnreachableKubernetesSource(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a")
	h.Add(c)
	// Switch to a Kubernetes source that cannot be reached: DEL never needs the API.
	kc := filepath.Join(h.Dir, "kubeconfig")
	h.WriteFile(kc, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: x}\n")
	h.Set("manifests", nil)
	h.Set("kubeconfig", kc)
	h.Del(c)
	h.AssertDetached(c, before)
}

func TestCheck(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a")
	h.Add(c)
	if _, err := h.CNITool(c, "check"); err != nil {
		t.Fatalf("CHECK of a healthy pod: %v", err)
	}
	// Remove the secondary interface behind plexus's back: CHECK must see it.
	harness.Must(t, c.NS.Do(func(_ ns.NetNS) error {
		l, err := netlink.LinkByName("net1")
		if err != nil {
			return err
		}
		return netlink.LinkDel(l)
	}))
	out, err := h.CNITool(c, "check")
	if err == nil || !strings.Contains(out, "demo/net-a (net1)") {
		t.Fatalf("CHECK harness.Must fail naming the broken attachment: %v %s", err, out)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

func TestRuntimeCNIVersions(t *testing.T) {
	for _, v := range []string{"0.3.1", "1.0.0"} {
		t.Run(v, func(t *testing.T) {
			h := harness.New(t)
			h.BridgeNAD("demo", "net-a")
			h.Pod("demo", "web", "net-a")
			h.Set("cniVersion", v)
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			out := h.Add(c)
			var res map[string]any
			harness.Must(t, json.Unmarshal([]byte(out), &res))
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
			if len(h.Status("demo", "web")) != 2 {
				t.Error("status incomplete")
			}
			h.Del(c)
			h.AssertNoLeaks(before)
		})
	}
}

// TestCapabilitiesReachDefaultNetwork: kubelet's runtimeConfig for a
// capability plexus declares reaches the default network's delegates
// (bandwidth shapes the host veth).
func TestCapabilitiesReachDefaultNetwork(t *testing.T) {
	h := harness.New(t)
	h.Set("capabilities", map[string]bool{"bandwidth": true})
	h.Pod("demo", "web", "")
	c := h.Container("demo", "web")
	c.Env = []string{`CAP_ARGS={"bandwidth":{"ingressRate":1000000,"ingressBurst":100000,"egressRate":1000000,"egressBurst":100000}}`}
	before := harness.HostVeths(t)
	h.Add(c)
	found := false
	for v := range harness.HostVeths(t) {
		if before[v] {
			continue
		}
		l, err := netlink.LinkByName(v)
		harness.Must(t, err)
		qs, err := netlink.QdiscList(l)
		harness.Must(t, err)
		for _, q := range qs {
			if q.Type() == "tbf" {
				found = true
			}
		}
	}
	if !found {
		t.Error("no tbf qdisc on the pod's host veth: the bandwidth runtimeConfig did not reach the delegate")
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// TestPodAnnotationsFromTheRuntime: with the pod-annotations capability the
// selection comes from the runtime's annotations and the pod is not read
// (the manifests source has no such pod, which would fail the ADD with 106);
// the default network, which does not declare the capability, is not handed
// the annotations, and the record does not keep them.
func TestPodAnnotationsFromTheRuntime(t *testing.T) {
	h := harness.New(t)
	h.Set("capabilities", map[string]bool{"io.kubernetes.cri.pod-annotations": true, "bandwidth": true})
	h.BridgeNAD("demo", "net-a")
	c := h.Container("demo", "web")
	c.Env = []string{`CAP_ARGS={"io.kubernetes.cri.pod-annotations":{"k8s.v1.cni.cncf.io/networks":"net-a","kubernetes.io/config.source":"api","big":"` + strings.Repeat("x", 4096) + `"}}`}
	before := harness.HostVeths(t)
	h.Add(c)
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0", "net1"}) {
		t.Errorf("interfaces %v, want eth0 and net1 from the runtime's selection", got)
	}
	if st := h.Status("demo", "web"); len(st) != 2 || st[1].Name != "demo/net-a" {
		t.Errorf("network-status %+v, want the default network and demo/net-a", st)
	}
	recs, err := filepath.Glob(filepath.Join(h.CacheDir, "records", "*.json"))
	harness.Must(t, err)
	if len(recs) != 1 {
		t.Fatalf("records %v, want one", recs)
	}
	rec, err := os.ReadFile(recs[0])
	harness.Must(t, err)
	if strings.Contains(string(rec), "pod-annotations") {
		t.Errorf("the record keeps the pod's annotations:\n%s", rec)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}
