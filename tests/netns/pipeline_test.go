package netns

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestAddDelBothFormats: s4.1.1 and s4.1.2, the default network first
// (s6.2), s4.2 repeated networks, s3.4.1 conflist NAD, status (s5).
func TestAddDelBothFormats(t *testing.T) {
	for _, format := range []string{"comma", "json"} {
		t.Run(format, func(t *testing.T) {
			h := harness.New(t)
			h.BridgeNAD("demo", "net-a")
			h.BridgeNAD("other", "net-b")
			// A NAD without spec.config: resolved from a conflist in confDir (s3.4.1 rule 2).
			h.NAD("demo", "net-c", "")
			h.WriteFile(filepath.Join(h.ConfDir, "net-c.conflist"), h.BridgeConf("net-c", h.Bridge(), "0.4.0", false))
			ann := "net-a,other/net-b,net-a,net-c"
			if format == "json" {
				ann = `[{"name":"net-a"},{"name":"net-b","namespace":"other"},{"name":"net-a"},{"name":"net-c"}]`
			}
			h.Pod("demo", "web", ann)
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)

			out := h.Add(c)
			var res struct {
				CNIVersion string `json:"cniVersion"`
				Interfaces []struct {
					Name    string `json:"name"`
					Sandbox string `json:"sandbox"`
				} `json:"interfaces"`
			}
			harness.Must(t, json.Unmarshal([]byte(out), &res))
			if res.CNIVersion != "1.0.0" || !hasSandboxIf(res.Interfaces, "eth0") {
				t.Errorf("runtime result harness.Must be the default network's: %s", out)
			}
			if got, want := harness.IfNames(c.Links(t)), []string{"eth0", "net1", "net2", "net3", "net4"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("interfaces %v, want %v", got, want)
			}
			st := h.Status("demo", "web")
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
				if got := c.IPs(t, ifName); !reflect.DeepEqual(got, e.IPs) {
					t.Errorf("entry %d ips %v, kernel has %v", i, e.IPs, got)
				}
			}
			if st[1].IPs[0] == st[3].IPs[0] {
				t.Error("a repeated network harness.Must be a separate attachment with its own address (s4.2)")
			}

			h.Del(c)
			h.AssertInterfaces(c, 0, "none after DEL")
			if h.StatusExists("demo", "web") {
				t.Error("status file left after DEL")
			}
			h.AssertNoLeaks(before)
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
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	// net1 is requested explicitly; the generated names must skip it.
	h.Pod("demo", "web", `[{"name":"net-a"},{"name":"net-a","interface":"net1"},{"name":"net-a","interface":"data0"}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	if got, want := harness.IfNames(c.Links(t)), []string{"data0", "eth0", "net1", "net2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("interfaces %v, want %v", got, want)
	}
	st := h.Status("demo", "web")
	if st[1].Interface != "net2" || st[2].Interface != "net1" || st[3].Interface != "data0" {
		t.Errorf("status interfaces: %+v", st)
	}
	h.Del(c)
	h.AssertNoLeaks(before)
}

func TestDuplicateRequestedInterfaceFails(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", `[{"name":"net-a","interface":"data0"},{"name":"net-a","interface":"data0"}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	if _, e := h.Plugin(c, "ADD"); e == nil || e.Code != 111 || !strings.Contains(e.Msg, `interface "data0"`) || !strings.Contains(e.Msg, "demo/web") {
		t.Fatalf("want an interface conflict error naming the pod and interface, got %+v", e)
	}
	h.AssertDetached(c, before)
}

func TestInvalidSelectionAttachesDefaultOnly(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", `[{"name":"net-a","ips":["not-an-ip"]}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.Add(c)
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0"}) {
		t.Fatalf("interfaces %v, want only eth0", got)
	}
	if st := h.Status("demo", "web"); len(st) != 1 || !st[0].Default {
		t.Errorf("status %+v", st)
	}
	log, _ := os.ReadFile(filepath.Join(h.Dir, "plexus.log"))
	if !strings.Contains(string(log), "not-an-ip") || !strings.Contains(string(log), "default network only") {
		t.Errorf("the warning harness.Must name the problem; log:\n%s", log)
	}
	h.Del(c)

	// strictSelection turns the same annotation into a failed ADD.
	h.Set("strictSelection", true)
	if _, e := h.Plugin(c, "ADD"); e == nil || e.Code != 100 || !strings.Contains(e.Msg, "not-an-ip") {
		t.Fatalf("strict selection: want code 100 naming the bad value, got %+v", e)
	}
	h.AssertDetached(c, before)
}
