package netns

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestAddDelBothFormats: s4.1.1 and s4.1.2, the default network first
// (s6.2), s4.2 repeated networks, s3.4.1 conflist NAD, status (s5).
func TestAddDelBothFormats(t *testing.T) {
	for _, format := range []string{"comma", "json"} {
		t.Run(format, func(t *testing.T) {
			h := newHarness(t)
			h.bridgeNAD("demo", "net-a")
			h.bridgeNAD("other", "net-b")
			// A NAD without spec.config: resolved from a conflist in confDir (s3.4.1 rule 2).
			h.nad("demo", "net-c", "")
			h.writeFile(filepath.Join(h.confDir, "net-c.conflist"), h.bridgeConf("net-c", h.bridge(), "0.4.0", false))
			ann := "net-a,other/net-b,net-a,net-c"
			if format == "json" {
				ann = `[{"name":"net-a"},{"name":"net-b","namespace":"other"},{"name":"net-a"},{"name":"net-c"}]`
			}
			h.pod("demo", "web", ann)
			c := h.container("demo", "web")
			before := hostVeths(t)

			out := h.add(c)
			var res struct {
				CNIVersion string `json:"cniVersion"`
				Interfaces []struct {
					Name    string `json:"name"`
					Sandbox string `json:"sandbox"`
				} `json:"interfaces"`
			}
			must(t, json.Unmarshal([]byte(out), &res))
			if res.CNIVersion != "1.0.0" || !hasSandboxIf(res.Interfaces, "eth0") {
				t.Errorf("runtime result must be the default network's: %s", out)
			}
			if got, want := ifNames(c.links(t)), []string{"eth0", "net1", "net2", "net3", "net4"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("interfaces %v, want %v", got, want)
			}
			st := h.status("demo", "web")
			wantNames := []string{"cluster-default", "demo/net-a", "other/net-b", "demo/net-a", "demo/net-c"}
			if len(st) != len(wantNames) {
				t.Fatalf("status has %d entries: %+v", len(st), st)
			}
			for i, e := range st {
				if e.Name != wantNames[i] || e.Default != (i == 0) {
					t.Errorf("entry %d = %+v, want name %s", i, e, wantNames[i])
				}
				ifName := []string{"eth0", "net1", "net2", "net3", "net4"}[i]
				if e.Interface != ifName || len(e.IPs) != 1 || e.MAC == "" {
					t.Errorf("entry %d = %+v", i, e)
				}
				if got := c.addrs(t, ifName); !reflect.DeepEqual(got, e.IPs) {
					t.Errorf("entry %d ips %v, kernel has %v", i, e.IPs, got)
				}
			}
			if st[1].IPs[0] == st[3].IPs[0] {
				t.Error("a repeated network must be a separate attachment with its own address (s4.2)")
			}

			h.del(c)
			if got := ifNames(c.links(t)); len(got) != 0 {
				t.Errorf("interfaces left after DEL: %v", got)
			}
			if h.statusExists("demo", "web") {
				t.Error("status file left after DEL")
			}
			h.assertNoLeaks(before)
		})
	}
}

func hasSandboxIf(ifs []struct {
	Name    string `json:"name"`
	Sandbox string `json:"sandbox"`
}, name string) bool {
	for _, i := range ifs {
		if i.Name == name && i.Sandbox != "" {
			return true
		}
	}
	return false
}

func TestRequestedInterfaceNames(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	// net1 is requested explicitly; the generated names must skip it.
	h.pod("demo", "web", `[{"name":"net-a"},{"name":"net-a","interface":"net1"},{"name":"net-a","interface":"data0"}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	if got, want := ifNames(c.links(t)), []string{"data0", "eth0", "net1", "net2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("interfaces %v, want %v", got, want)
	}
	st := h.status("demo", "web")
	if st[1].Interface != "net2" || st[2].Interface != "net1" || st[3].Interface != "data0" {
		t.Errorf("status interfaces: %+v", st)
	}
	h.del(c)
	h.assertNoLeaks(before)
}

func TestDuplicateRequestedInterfaceFails(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", `[{"name":"net-a","interface":"data0"},{"name":"net-a","interface":"data0"}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	if _, e := h.plugin(c, "ADD"); e == nil || e.Code != 111 || !strings.Contains(e.Msg, `interface "data0"`) || !strings.Contains(e.Msg, "demo/web") {
		t.Fatalf("want an interface conflict error naming the pod and interface, got %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("a rejected ADD attached %v", got)
	}
	h.assertNoLeaks(before)
}

func TestInvalidSelectionAttachesDefaultOnly(t *testing.T) {
	h := newHarness(t)
	h.bridgeNAD("demo", "net-a")
	h.pod("demo", "web", `[{"name":"net-a","ips":["not-an-ip"]}]`)
	c := h.container("demo", "web")
	before := hostVeths(t)
	h.add(c)
	if got := ifNames(c.links(t)); !reflect.DeepEqual(got, []string{"eth0"}) {
		t.Fatalf("interfaces %v, want only eth0", got)
	}
	if st := h.status("demo", "web"); len(st) != 1 || !st[0].Default {
		t.Errorf("status %+v", st)
	}
	log, _ := os.ReadFile(filepath.Join(h.dir, "plexus.log"))
	if !strings.Contains(string(log), "not-an-ip") || !strings.Contains(string(log), "default network only") {
		t.Errorf("the warning must name the problem; log:\n%s", log)
	}
	h.del(c)

	// strictSelection turns the same annotation into a failed ADD.
	h.set("strictSelection", true)
	if _, e := h.plugin(c, "ADD"); e == nil || e.Code != 100 || !strings.Contains(e.Msg, "not-an-ip") {
		t.Fatalf("strict selection: want code 100 naming the bad value, got %+v", e)
	}
	if got := ifNames(c.links(t)); len(got) != 0 {
		t.Errorf("interfaces %v after a strict failure", got)
	}
	h.assertNoLeaks(before)
}
