package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

// TestS7_3ParallelContainers: 20 pods ADDed and DELed at once, each with
// two secondary networks; nothing leaks.
func TestS7_3ParallelContainers(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.tuningNAD("demo", "net-b")
	const n = 20
	cs := make([]*container, n)
	for i := range cs {
		name := fmt.Sprintf("pod-%d", i)
		h.pod("demo", name, "net-a,net-b")
		cs[i] = h.container("demo", name)
	}
	before := hostVeths(t)
	parallel(t, cs, func(c *container) error { _, err := h.cnitool(c, "add"); return err })
	seen := map[string]bool{}
	for _, c := range cs {
		if got := ifNames(c.links(t)); len(got) != 3 {
			t.Errorf("%s has %v", c.name, got)
		}
		for _, e := range h.status("demo", c.name) {
			for _, ip := range e.IPs {
				if seen[ip] {
					t.Errorf("address %s handed out twice", ip)
				}
				seen[ip] = true
			}
		}
	}
	parallel(t, cs, func(c *container) error { _, err := h.cnitool(c, "del"); return err })
	for _, c := range cs {
		if got := ifNames(c.links(t)); len(got) != 0 {
			t.Errorf("%s still has %v", c.name, got)
		}
	}
	h.assertNoLeaks(before)
}

func parallel(t *testing.T, cs []*container, f func(*container) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(c); err != nil {
				errs <- fmt.Errorf("%s: %w", c.name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDelWithCorruptRecord: DEL falls back to what libcni's own cache knows.
func TestDelWithCorruptRecord(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", "net-a")
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.plugin(c, "ADD")
	rec := filepath.Join(h.cacheDir, "records", "direct-web.json")
	b, err := os.ReadFile(rec)
	must(t, err)
	must(t, os.WriteFile(rec, b[:len(b)/2], 0o600))
	if _, e := h.plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL with a truncated record: %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("interfaces left: %v", got)
	}
	h.assertNoLeaks(before)
}

// TestAddTwiceReplacesAttachments: a second ADD without DEL must not
// attach twice or hold two leases.
func TestAddTwiceReplacesAttachments(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", "net-a")
	c := h.container("demo", "web")
	before := hostVeths(t)
	if _, e := h.plugin(c, "ADD"); e != nil {
		t.Fatal(e)
	}
	if _, e := h.plugin(c, "ADD"); e != nil {
		t.Fatalf("second ADD: %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 2 {
		t.Errorf("interfaces %v", got)
	}
	leases := 0
	_ = filepath.WalkDir(h.ipamDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Count(d.Name(), ".") == 3 {
			leases++
		}
		return nil
	})
	if leases != 2 {
		t.Errorf("%d leases held, want 2 (one per attachment)", leases)
	}
	if _, e := h.plugin(c, "DEL"); e != nil {
		t.Fatal(e)
	}
	h.assertNoLeaks(before)
}

func TestDelOfUnknownContainer(t *testing.T) {
	h := newHarness(t)
	h.pod("demo", "ghost", "")
	c := h.container("demo", "ghost")
	before := hostVeths(t)
	if _, e := h.plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL before any ADD: %+v", e)
	}
	h.assertNoLeaks(before)
}

func TestMissingNADFailsNamingIt(t *testing.T) {
	h := newHarness(t)
	h.pod("demo", "web", "net-a,elsewhere/ghost")
	h.bridgeNAD("demo", "net-a")
	c := h.container("demo", "web")
	before := hostVeths(t)
	_, e := h.plugin(c, "ADD")
	if e == nil || e.Code != 101 || !strings.Contains(e.Msg, "elsewhere/ghost") {
		t.Fatalf("want code 101 naming the NAD, got %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("a NAD lookup failure attached %v", got)
	}
	h.assertNoLeaks(before)
}

// TestS3_4_2NameInjectedForThickConfig: a NAD config without "name".
func TestS3_4_2NameInjectedForThickConfig(t *testing.T) {
	h := newHarness(t)
	h.nad("demo", "unnamed", `{"cniVersion":"1.0.0","type":"bridge","bridge":"`+h.bridge()+`","ipam":{"type":"host-local","subnet":"`+subnet()+`","dataDir":"`+h.ipamDir+`"}}`)
	h.pod("demo", "web", "unnamed")
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	// libcni caches under the network name: the injected one.
	cached, err := libcni.NewCNIConfigWithCacheDir(nil, h.cacheDir, nil).GetCachedAttachments("")
	must(t, err)
	found := false
	for _, a := range cached {
		found = found || a.Network == "unnamed"
	}
	if !found {
		t.Errorf("no attachment ran with the injected name; cached: %+v", cached)
	}
	h.del(c)
	h.assertNoLeaks(before)
}

// TestGCKeepsLiveAttachments: GC with one of two containers valid removes
// the other's attachments and leases and keeps the live one's.
func TestGCKeepsLiveAttachments(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "live", "net-a")
	h.pod("demo", "stale", "net-a")
	live, stale := h.container("demo", "live"), h.container("demo", "stale")
	before := hostVeths(t)
	h.plugin(live, "ADD")
	h.plugin(stale, "ADD")
	gc := `{"cniVersion":"1.1.0","name":"plexus","cni.dev/valid-attachments":[{"containerID":"direct-live","ifname":"eth0"}]}`
	h.pluginStdin(t, "GC", gc)
	if got := ifNames(live.links(t)); len(got) != 2 {
		t.Errorf("live container lost interfaces: %v", got)
	}
	if got := ifNames(stale.links(t)); len(got) != 0 {
		t.Errorf("stale container kept %v", got)
	}
	if _, err := os.Stat(filepath.Join(h.cacheDir, "records", "direct-stale.json")); !os.IsNotExist(err) {
		t.Error("stale record kept")
	}
	h.plugin(live, "DEL")
	h.assertNoLeaks(before)
}

func TestStatusReportsDefaultNetwork(t *testing.T) {
	h := newHarness(t)
	h.set("cniVersion", "1.1.0")
	h.pluginStdin(t, "STATUS", "")
	h.set("clusterNetwork", filepath.Join(h.dir, "missing.conflist"))
	out, e := h.pluginStdinErr("STATUS", "")
	if e == nil || e.Code != 112 || !strings.Contains(e.Msg, "missing.conflist") {
		t.Fatalf("STATUS with a missing default network: %+v %s", e, out)
	}
}
