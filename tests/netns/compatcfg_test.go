package netns

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/plexus-cni/plexus/tests/harness"
)

// annotatedPod writes a Pod manifest with any annotations.
func annotatedPod(h *harness.World, namespace, name string, ann map[string]string) {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": namespace, "uid": "uid-" + name, "annotations": ann},
		"spec":     map[string]any{"nodeName": "node1"},
	})
	h.WriteFile(filepath.Join(h.Manifests, fmt.Sprintf("pod-%s-%s.yaml", namespace, name)), string(b))
}

// bridgePorts counts the interfaces enslaved to a bridge (the host ends of
// the veths its pods got).
func bridgePorts(t *testing.T, br string) int {
	t.Helper()
	l, err := netlink.LinkByName(br)
	if err != nil {
		return 0
	}
	links, err := netlink.LinkList()
	harness.Must(t, err)
	n := 0
	for _, x := range links {
		if x.Attrs().MasterIndex == l.Attrs().Index {
			n++
		}
	}
	return n
}

// v1.multus-cni.io/default-network: the pod's eth0 comes from the NAD it
// names, the cluster-wide default network is not attached, and DEL undoes
// exactly that from the record once the pod is gone.
func TestPodDefaultNetworkAnnotation(t *testing.T) {
	h := harness.New(t)
	altBr := h.Bridge()
	h.NAD("kube-system", "alt-default", h.BridgeConf("alt-default", altBr, "1.0.0", false))
	h.BridgeNAD("demo", "net-a")
	annotatedPod(h, "demo", "web", map[string]string{
		"v1.multus-cni.io/default-network": "alt-default",
		"k8s.v1.cni.cncf.io/networks":      "net-a",
	})
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)

	h.Add(c)
	h.AssertIfNames(c, "eth0", "net1")
	st := h.Status("demo", "web")
	if len(st) != 2 || st[0].Name != "alt-default" || !st[0].Default || st[0].Interface != "eth0" || st[1].Name != "demo/net-a" {
		t.Fatalf("status %+v", st)
	}
	if got := c.IPs(t, "eth0"); !reflect.DeepEqual(got, st[0].IPs) {
		t.Errorf("eth0 has %v, status says %v", got, st[0].IPs)
	}
	if n := bridgePorts(t, altBr); n != 1 {
		t.Errorf("the chosen network's bridge %s has %d ports, want eth0's peer", altBr, n)
	}

	h.RemovePod("demo", "web")
	h.Del(c)
	h.AssertInterfaces(c, 0, "none after DEL")
	if n := bridgePorts(t, altBr); n != 0 {
		t.Errorf("the chosen network's bridge keeps %d ports after DEL", n)
	}
	h.AssertNoLeaks(before)
}

func TestPodDefaultNetworkInvalidAttachesNothing(t *testing.T) {
	h := harness.New(t)
	annotatedPod(h, "demo", "web", map[string]string{"v1.multus-cni.io/default-network": "../alt"})
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	_, cerr := h.Plugin(c, "ADD")
	if cerr == nil || cerr.Code != 100 {
		t.Fatalf("ADD error %+v, want code 100 (invalid annotation)", cerr)
	}
	h.AssertInterfaces(c, 0, "none after a refused ADD")
	h.AssertNoLeaks(before)
}

// defaultNetworks: after the default network, before the pod's selections;
// pods in systemNamespaces are exempt.
func TestDefaultNetworks(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("kube-system", "sidecar")
	h.BridgeNAD("demo", "net-a")
	h.BridgeNAD("kube-system", "net-a")
	h.Set("defaultNetworks", []string{"sidecar"})
	h.Set("systemNamespaces", []string{"kube-system"})
	h.Pod("demo", "web", "net-a")
	h.Pod("kube-system", "dns", "net-a")
	web, dns := h.Container("demo", "web"), h.Container("kube-system", "dns")
	before := harness.HostVeths(t)

	h.Add(web)
	h.AssertIfNames(web, "eth0", "net1", "net2")
	var names []string
	for _, e := range h.Status("demo", "web") {
		names = append(names, e.Name+"@"+e.Interface)
	}
	if want := []string{"cluster-default@eth0", "kube-system/sidecar@net1", "demo/net-a@net2"}; !reflect.DeepEqual(names, want) {
		t.Errorf("status %v, want %v", names, want)
	}

	h.Add(dns)
	h.AssertIfNames(dns, "eth0", "net1")
	if st := h.Status("kube-system", "dns"); len(st) != 2 || st[1].Name != "kube-system/net-a" {
		t.Errorf("a system namespace's pod got %+v", st)
	}

	h.Del(web)
	h.Del(dns)
	h.AssertInterfaces(web, 0, "none after DEL")
	h.AssertNoLeaks(before)
}

// delegates: an inline default network, with the reference plugins.
func TestDelegatesAsTheDefaultNetwork(t *testing.T) {
	h := harness.New(t)
	var conf map[string]any
	harness.Must(t, json.Unmarshal([]byte(h.BridgeConf("inline-default", h.Bridge(), "1.0.0", false)), &conf))
	h.Set("clusterNetwork", nil)
	h.Set("delegates", []any{conf})
	h.Pod("demo", "web", "")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	h.AssertIfNames(c, "eth0")
	if st := h.Status("demo", "web"); len(st) != 1 || st[0].Name != "inline-default" || !st[0].Default {
		t.Errorf("status %+v", st)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// A libcni subdirectory chain: the default network's conflist names no
// plugins; they are in <dir>/<name>/*.conf. Its tuning plugin's MAC shows
// the whole chain ran, and DEL undoes it from the record after the files
// are gone.
func TestSubdirectoryChainDefaultNetwork(t *testing.T) {
	h := harness.New(t)
	dir := filepath.Join(h.Dir, "netd")
	harness.Must(t, os.MkdirAll(filepath.Join(dir, "chained"), 0o755))
	h.WriteFile(filepath.Join(dir, "10-chained.conflist"), `{"cniVersion":"1.0.0","name":"chained"}`)
	bridge, _ := json.Marshal(map[string]any{"type": "bridge", "bridge": h.Bridge(), "isGateway": true,
		"ipam": map[string]any{"type": "host-local", "subnet": harness.Subnet(), "dataDir": h.IPAMDir}})
	h.WriteFile(filepath.Join(dir, "chained", "10-bridge.conf"), string(bridge))
	h.WriteFile(filepath.Join(dir, "chained", "20-tuning.conf"), `{"type":"tuning","mac":"02:11:22:33:44:55"}`)
	h.Set("clusterNetwork", filepath.Join(dir, "10-chained.conflist"))
	h.Pod("demo", "web", "")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)

	h.Add(c)
	eth0 := c.Links(t)["eth0"]
	if eth0 == nil || eth0.Attrs().HardwareAddr.String() != "02:11:22:33:44:55" {
		t.Fatalf("eth0 %v: the chain's tuning plugin did not run", eth0)
	}
	harness.Must(t, os.RemoveAll(filepath.Join(dir, "chained")))
	h.Del(c)
	h.AssertInterfaces(c, 0, "none after DEL")
	h.AssertNoLeaks(before)
}

// readinessindicatorfile: absent, ADD fails naming it (112) and attaches
// nothing; present, ADD proceeds.
func TestReadinessIndicatorFile(t *testing.T) {
	h := harness.New(t)
	ready := filepath.Join(h.Dir, "default-ready")
	h.Set("readinessindicatorfile", ready)
	h.Set("readinessTimeout", "300ms")
	h.Pod("demo", "web", "")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	_, cerr := h.Plugin(c, "ADD")
	if cerr == nil || cerr.Code != 112 || !strings.Contains(cerr.Msg, ready) {
		t.Fatalf("ADD error %+v, want 112 naming %s", cerr, ready)
	}
	h.AssertInterfaces(c, 0, "none after a refused ADD")
	h.AssertNoLeaks(before)

	h.WriteFile(ready, "")
	h.Add(c)
	h.AssertIfNames(c, "eth0")
	h.Del(c)
	h.AssertNoLeaks(before)
}
