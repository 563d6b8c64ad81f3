package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
)

// fakeRouter records default-route changes.
type fakeRouter struct {
	calls []string // "netns ifName gw"
	fail  error
}

func (r *fakeRouter) ReplaceDefaultRoute(_ context.Context, netns, ifName string, gw net.IP) error {
	r.calls = append(r.calls, netns+" "+ifName+" "+gw.String())
	return r.fail
}

// statusEntries decodes the published network-status as generic maps, so
// plexus's reverse-domain keys are visible.
func statusEntries(t *testing.T, doc []byte) []map[string]json.RawMessage {
	t.Helper()
	var st []map[string]json.RawMessage
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatalf("status %s: %v", doc, err)
	}
	return st
}

func TestAddCompatCommaInterface(t *testing.T) {
	tests := []struct {
		name, compat string
		calls        []string
		event        string
	}{
		{"compat on", "", []string{"ADD default-net eth0", "ADD net-a eth1", "ADD net-b net1"}, "Normal AddedInterfaces"},
		// s4.1.1 alone: "net-a@eth1" is not a valid reference, so the
		// annotation is invalid and ignored as before.
		{"compat off", config.CompatOff, []string{"ADD default-net eth0"}, "Warning InvalidNetworkSelection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "net-a@eth1,net-b")
			f.p.Config.Compat = tt.compat
			if _, err := f.p.Add(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.cni.calls, tt.calls) {
				t.Errorf("calls %v, want %v", f.cni.calls, tt.calls)
			}
			if len(f.src.events) == 0 || !strings.HasPrefix(f.src.events[0], tt.event) {
				t.Errorf("events %q, want %q first", f.src.events, tt.event)
			}
		})
	}
	f := newFixture(t, "net-a@eth0")
	_, err := f.p.Add(context.Background(), f.req)
	if te := cniErr(t, err); te.Code != codes.InterfaceConflict || !strings.Contains(te.Msg, `requests interface "eth0", already used by the default network`) {
		t.Errorf("error %+v", te)
	}
}

// TestAddCompatCNIArgs: cni-args reach every delegate plugin's args.cni
// beside the element's own "ips", and no other attachment's.
func TestAddCompatCNIArgs(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a","ips":["10.0.0.2/24"],"cni-args":{"foo":"bar","n":5}}]`)
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	conf := string(f.cni.lastConf["net-a"])
	if !strings.Contains(conf, `"args":{"cni":{"foo":"bar","ips":["10.0.0.2/24"],"n":5}}`) {
		t.Errorf("args.cni: %s", conf)
	}
	if strings.Contains(string(f.cni.lastConf["default-net"]), "foo") {
		t.Error("cni-args reached the default network")
	}
}

// TestAddCNIArgsCannotRequestAddresses: a cni-args key that a delegate
// would read as "ips" or "mac" (encoding/json folds case) makes the
// annotation invalid: no delegate of the selection runs, so no address or
// MAC the policy never saw is assigned, and the pod is told which key.
func TestAddCNIArgsCannotRequestAddresses(t *testing.T) {
	for _, args := range []string{`{"IPs":["10.77.9.99/24"]}`, `{"ip\u017f":["10.77.9.99/24"]}`, `{"MAC":"02:00:00:00:00:99"}`, `{"Mac":"02:00:00:00:00:99"}`, `{"ips":["10.77.9.99/24"]}`} {
		t.Run(args, func(t *testing.T) {
			f := newFixture(t, `[{"name":"net-a","cni-args":`+args+`}]`)
			if _, err := f.p.Add(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			if conf, ran := f.cni.lastConf["net-a"]; ran {
				t.Fatalf("the selection's delegate ran with %s", conf)
			}
			if len(f.src.events) == 0 || !strings.Contains(f.src.events[0], "InvalidNetworkSelection") || !strings.Contains(f.src.events[0], "is read by delegates as") {
				t.Errorf("events %q, want InvalidNetworkSelection naming the key", f.src.events)
			}
		})
	}
}

// TestAddCompatCapabilities: portMappings and bandwidth become runtimeConfig
// for a delegate declaring the capability; for one that does not they are
// ignored, shown in the status entry and counted.
func TestAddCompatCapabilities(t *testing.T) {
	pm := `"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]`
	bw := `"bandwidth":{"ingressRate":1000,"ingressBurst":100}`
	tests := []struct {
		name, caps  string
		wantCaps    []string
		wantIgnored []string
	}{
		{"both declared", `{"portMappings":true,"bandwidth":true}`, []string{"bandwidth", "portMappings"}, nil},
		{"portMappings only", `{"portMappings":true}`, []string{"portMappings"}, []string{"bandwidth"}},
		{"none declared", `{}`, nil, []string{"bandwidth", "portMappings"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, `[{"name":"net-cap",`+pm+`,`+bw+`},{"name":"net-a"}]`)
			f.src.addNAD("demo", "net-cap", `{"cniVersion":"1.0.0","name":"net-cap","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":`+tt.caps+`}]}`)
			var counted []string
			f.p.OnIgnored = func(k string) { counted = append(counted, k) }
			if _, err := f.p.Add(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			rt := f.cni.lastRT["net-cap"].CapabilityArgs
			var got []string
			for _, k := range []string{"bandwidth", "portMappings"} {
				if rt[k] != nil {
					got = append(got, k)
				}
			}
			if !reflect.DeepEqual(got, tt.wantCaps) {
				t.Errorf("capability args %v, want %v", rt, tt.wantCaps)
			}
			if f.cni.lastRT["net-a"].CapabilityArgs != nil {
				t.Errorf("another attachment got %v", f.cni.lastRT["net-a"].CapabilityArgs)
			}
			if !reflect.DeepEqual(counted, tt.wantIgnored) {
				t.Errorf("counted %v, want %v", counted, tt.wantIgnored)
			}
			st := statusEntries(t, f.src.status)
			var ignored map[string]string
			_ = json.Unmarshal(st[1][StatusIgnoredKey], &ignored)
			for _, k := range tt.wantIgnored {
				if !strings.Contains(ignored[k], `declares the "`+k+`" capability`) {
					t.Errorf("status ignored %v lacks %s", ignored, k)
				}
			}
			if len(tt.wantIgnored) == 0 && st[1][StatusIgnoredKey] != nil {
				t.Errorf("nothing was ignored, yet status says %s", st[1][StatusIgnoredKey])
			}
		})
	}
}

// TestAddCompatOffIgnoresKeysVisibly: with "compat": "off" (or
// strictSelection alone) the Multus keys are reserved keys (s4.1.2.1):
// ignored with a warning, shown in the status entry, counted.
func TestAddCompatOffIgnoresKeysVisibly(t *testing.T) {
	for _, conf := range []config.Config{{CallSettings: config.CallSettings{Compat: config.CompatOff}}, {CallSettings: config.CallSettings{StrictSelection: true}}} {
		f := newFixture(t, `[{"name":"net-a","default-route":["10.0.0.1"],"cni-args":{"foo":"bar"},"color":"red"}]`)
		f.p.Config.Compat, f.p.Config.StrictSelection = conf.Compat, conf.StrictSelection
		routes := &fakeRouter{}
		f.p.Routes = routes
		var counted []string
		f.p.OnIgnored = func(k string) { counted = append(counted, k) }
		if _, err := f.p.Add(context.Background(), f.req); err != nil {
			t.Fatal(err)
		}
		if len(routes.calls) != 0 || strings.Contains(string(f.cni.lastConf["net-a"]), "foo") {
			t.Errorf("compat keys acted on: routes %v, config %s", routes.calls, f.cni.lastConf["net-a"])
		}
		if want := []string{"cni-args", "color", "default-route"}; !reflect.DeepEqual(counted, want) {
			t.Errorf("counted %v, want %v", counted, want)
		}
		golden(t, "compat-off", f.src.status)
		if n := strings.Count(strings.Join(f.src.events, "\n"), "NetworkSelectionWarning"); n != 3 {
			t.Errorf("%d warnings, want one per ignored key: %q", n, f.src.events)
		}
	}
}

func TestAddCompatDefaultRoute(t *testing.T) {
	tests := []struct {
		name     string
		ann      string
		ips      map[string]string
		fail     error
		routes   []string
		wantCode uint
		wantMsg  string
	}{
		{name: "v4 and v6", ann: `[{"name":"net-a"},{"name":"net-b","default-route":["10.2.0.1","fd00:2::1"]}]`,
			ips:    map[string]string{"net-b": "10.2.0.5/24,fd00:2::5/64"},
			routes: []string{"/var/run/netns/test net2 10.2.0.1", "/var/run/netns/test net2 fd00:2::1"}},
		{name: "v6 outside the subnets", ann: `[{"name":"net-b","default-route":["10.2.0.1","fd00:3::1"]}]`,
			ips:    map[string]string{"net-b": "10.2.0.5/24,fd00:2::5/64"},
			routes: []string{"/var/run/netns/test net1 10.2.0.1"}, wantCode: codes.DefaultRoute,
			wantMsg: `gateway fd00:3::1 is in none of the attachment's subnets (10.2.0.0/24, fd00:2::/64)`},
		{name: "gateway outside the subnet", ann: `[{"name":"net-b","default-route":["10.3.0.1"]}]`,
			ips: map[string]string{"net-b": "10.2.0.5/24"}, wantCode: codes.DefaultRoute,
			wantMsg: `network demo/net-b (net1): "default-route" gateway 10.3.0.1 is in none of the attachment's subnets (10.2.0.0/24)`},
		{name: "route change fails", ann: `[{"name":"net-b","default-route":["10.2.0.1"]}]`,
			ips: map[string]string{"net-b": "10.2.0.5/24"}, fail: errors.New("netlink says no"),
			routes: []string{"/var/run/netns/test net1 10.2.0.1"}, wantCode: codes.DefaultRoute, wantMsg: "netlink says no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.ann)
			f.cni.ips = tt.ips
			routes := &fakeRouter{fail: tt.fail}
			f.p.Routes = routes
			_, err := f.p.Add(context.Background(), f.req)
			if !reflect.DeepEqual(routes.calls, tt.routes) {
				t.Errorf("route changes %v, want %v", routes.calls, tt.routes)
			}
			if tt.wantCode != 0 {
				if te := cniErr(t, err); te.Code != tt.wantCode || !strings.Contains(te.Msg, tt.wantMsg) {
					t.Fatalf("error %+v, want %d %q", te, tt.wantCode, tt.wantMsg)
				}
				// s7.2: a failed ADD is undone: every delegate gets its DEL.
				if last := f.cni.calls[len(f.cni.calls)-1]; last != "DEL default-net eth0" {
					t.Errorf("calls %v: not rolled back", f.cni.calls)
				}
				if rec, _ := f.p.Records.Load("c1"); rec != nil {
					t.Error("a failed ADD left a record")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "default-route-"+strings.ReplaceAll(tt.name, " ", "-"), f.src.status)
		})
	}
}

// TestAddCompatDefaultRouteNeedsARouter: a pipeline that cannot change
// routes refuses the request instead of ignoring it.
func TestAddCompatDefaultRouteNeedsARouter(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a","default-route":["10.0.0.1"]}]`)
	_, err := f.p.Add(context.Background(), f.req)
	if te := cniErr(t, err); te.Code != codes.DefaultRoute || !strings.Contains(te.Msg, "cannot change routes") {
		t.Errorf("error %+v", te)
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares a network-status document with testdata/<name>.golden.json.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./core/pipeline -update to create it)", err)
	}
	if strings.TrimSpace(string(want)) != string(got) {
		t.Errorf("%s differs from golden:\n%s\nwant:\n%s", name, got, want)
	}
}

// TestAddUnownedReverseDomainKeysShownInStatus: without an extension stage
// a reverse-domain key is ignored (s4.1.2.1 leaves it to implementations):
// once in the warnings, in the status entry and in the count.
func TestAddUnownedReverseDomainKeysShownInStatus(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a","com.example.vlan":100}]`)
	var counted []string
	f.p.OnIgnored = func(k string) { counted = append(counted, k) }
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	st := statusEntries(t, f.src.status)
	if got := string(st[1][StatusIgnoredKey]); !strings.Contains(got, `"com.example.vlan": "no extension owns this key"`) {
		t.Errorf("status entry: %s", f.src.status)
	}
	if !reflect.DeepEqual(counted, []string{"com.example.vlan"}) {
		t.Errorf("counted %v", counted)
	}
	if n := strings.Count(strings.Join(f.src.events, "\n"), "com.example.vlan"); n != 1 {
		t.Errorf("%d warnings name the key, want 1: %q", n, f.src.events)
	}
}
