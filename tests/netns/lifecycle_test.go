package netns

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"

	"github.com/containernetworking/cni/libcni"
)

// TestS7_3ParallelContainers: 20 pods ADDed and DELed at once, each with
// two secondary networks; nothing leaks.
func TestS7_3ParallelContainers(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	tuningNAD(h, "demo", "net-b")
	cs := h.Pods("demo", 20, "net-a,net-b")
	before := harness.HostVeths(t)
	h.AddAll(cs)
	seen := map[string]bool{}
	for _, c := range cs {
		h.AssertInterfaces(c, 3, "3")
		for _, e := range h.Status("demo", c.Name) {
			for _, ip := range e.IPs {
				if seen[ip] {
					t.Errorf("address %s handed out twice", ip)
				}
				seen[ip] = true
			}
		}
	}
	h.DelAll(cs)
	for _, c := range cs {
		h.AssertInterfaces(c, 0, "none after DEL")
	}
	h.AssertNoLeaks(before)
}

// TestAddTwiceReplacesAttachments: a second ADD without DEL must not
// attach twice or hold two leases.
func TestAddTwiceReplacesAttachments(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a")
	h.MustPlugin(c, "ADD", "")
	h.MustPlugin(c, "ADD", "second ADD")
	h.AssertInterfaces(c, 2, "2")
	leases := 0
	_ = filepath.WalkDir(h.IPAMDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Count(d.Name(), ".") == 3 {
			leases++
		}
		return nil
	})
	if leases != 2 {
		t.Errorf("%d leases held, want 2 (one per attachment)", leases)
	}
	h.MustPlugin(c, "DEL", "")
	h.AssertNoLeaks(before)
}

func TestDelOfUnknownContainer(t *testing.T) {
	h := harness.New(t)
	h.Pod("demo", "ghost", "")
	c := h.Container("demo", "ghost")
	before := harness.HostVeths(t)
	h.MustPlugin(c, "DEL", "DEL before any ADD")
	h.AssertNoLeaks(before)
}

// TestRepeatedDelWithoutNetnsRunsNoDelegate: containerd sends DEL again,
// without a netns, after the first DEL finished. plexus answers it without
// running the default network's delegates: the default network is broken
// after the first DEL (its plugin does not exist), and the repeated DEL
// still succeeds. A DEL that follows no finished DEL runs them, so it
// fails on the broken network, naming it.
func TestRepeatedDelWithoutNetnsRunsNoDelegate(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a")
	if _, e := h.Plugin(c, "ADD"); e != nil {
		t.Fatalf("ADD: %+v", e)
	}
	if _, e := h.Plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL: %+v", e)
	}
	h.AssertDetached(c, before)
	h.WriteFile(filepath.Join(h.Dir, "default.conflist"), `{"cniVersion":"1.0.0","name":"cluster-default","plugins":[{"type":"plexus-test-no-such-plugin"}]}`)
	noNetns := []string{"CNI_NETNS="}
	if _, e := h.PluginEdited(c, "DEL", noNetns, nil); e != nil {
		t.Fatalf("repeated DEL without a netns ran a delegate: %+v", e)
	}
	log, err := os.ReadFile(filepath.Join(h.Dir, "plexus.log"))
	harness.Must(t, err)
	if !strings.Contains(string(log), "DEL repeated after a finished DEL") {
		t.Errorf("plexus.log does not say the repeated DEL was answered from the finished one:\n%s", log)
	}
	other := h.Container("demo", "other")
	_, e := h.PluginEdited(other, "DEL", noNetns, nil)
	if e == nil || !strings.Contains(e.Msg, "cluster-default") || !strings.Contains(e.Msg, "plexus-test-no-such-plugin") {
		t.Errorf("DEL of a container never deleted: want the default network's delegate to run and fail naming cluster-default, got %+v", e)
	}
}

func TestMissingNADFailsNamingIt(t *testing.T) {
	h := harness.New(t)
	h.Pod("demo", "web", "net-a,elsewhere/ghost")
	h.BridgeNAD("demo", "net-a")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.AddRefused(c, before, 101, "elsewhere/ghost")
}

// TestS3_4_2NameInjectedForThickConfig: a NAD config without "name".
func TestS3_4_2NameInjectedForThickConfig(t *testing.T) {
	h := harness.New(t)
	h.NAD("demo", "unnamed", `{"cniVersion":"1.0.0","type":"bridge","bridge":"`+h.Bridge()+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+h.IPAMDir+`"}}`)
	h.Pod("demo", "web", "unnamed")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	// libcni caches under the network name: the injected one.
	cached, err := libcni.NewCNIConfigWithCacheDir(nil, h.CacheDir, nil).GetCachedAttachments("")
	harness.Must(t, err)
	found := false
	for _, a := range cached {
		found = found || a.Network == "unnamed"
	}
	if !found {
		t.Errorf("no attachment ran with the injected name; cached: %+v", cached)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

// TestGCKeepsLiveAttachments: GC with one of two containers valid removes
// the other's attachments and leases and keeps the live one's.
func TestGCKeepsLiveAttachments(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "live", "net-a")
	h.Pod("demo", "stale", "net-a")
	live, stale := h.Container("demo", "live"), h.Container("demo", "stale")
	before := harness.HostVeths(t)
	h.Plugin(live, "ADD")
	h.Plugin(stale, "ADD")
	gc := `{"cniVersion":"1.1.0","name":"plexus","cni.dev/valid-attachments":[{"containerID":"direct-live","ifname":"eth0"}]}`
	h.PluginStdin(t, "GC", gc)
	h.AssertInterfaces(live, 2, "the live container's 2")
	h.AssertInterfaces(stale, 0, "none in the stale container")
	if _, err := os.Stat(filepath.Join(h.CacheDir, "records", "direct-stale.json")); !os.IsNotExist(err) {
		t.Error("stale record kept")
	}
	h.Plugin(live, "DEL")
	h.AssertNoLeaks(before)
}

func TestStatusReportsDefaultNetwork(t *testing.T) {
	h := harness.New(t)
	h.Set("cniVersion", "1.1.0")
	h.PluginStdin(t, "STATUS", "")
	h.Set("clusterNetwork", filepath.Join(h.Dir, "missing.conflist"))
	out, e := h.PluginStdinErr("STATUS", "")
	if e == nil || e.Code != 112 || !strings.Contains(e.Msg, "missing.conflist") {
		t.Fatalf("STATUS with a missing default network: %+v %s", e, out)
	}
}

// TestVersionReportsSupportedVersions: VERSION lists 0.3.0 to 1.1.0, for
// the full plugin and the thick-mode shim alike.
func TestVersionReportsSupportedVersions(t *testing.T) {
	h := harness.New(t)
	out := h.PluginStdin(t, "VERSION", `{"cniVersion":"1.1.0"}`)
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	harness.Must(t, json.Unmarshal([]byte(out), &v))
	want := []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}
	if !reflect.DeepEqual(v.SupportedVersions, want) {
		t.Errorf("supportedVersions %v, want %v", v.SupportedVersions, want)
	}
}
