package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/status"
)

// statusIPs are the addresses the fake delegates report, as CNI results
// give them: prefixes, one IPv6 address not in canonical form.
var statusIPs = map[string]string{
	"default-net": "10.0.0.2/24",
	"net-a":       "10.1.0.5/24",
	"net-b":       "10.2.0.5/24,FD00:2:0:0::5/64",
	"net-c":       "10.3.0.5/24",
}

// addedFixture is newFixture with statusIPs, the pod ADDed and the
// published status on the pod, as the API has it then.
func addedFixture(t *testing.T, networks string) *fixture {
	t.Helper()
	f := newFixture(t, networks)
	f.cni.ips = statusIPs
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.src.pods["demo/web"].Annotations[status.Annotation] = string(f.src.status)
	f.cni.calls, f.src.events = nil, nil
	return f
}

// withPrefixes is doc with each "ips" value a prefix ("10.0.0.2/24"), as
// a status published with the results' prefixes has it.
func withPrefixes(t *testing.T, doc []byte) string {
	t.Helper()
	var list []*status.Entry
	if err := json.Unmarshal(doc, &list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		for i, s := range e.IPs {
			a, bits := netip.MustParseAddr(s), 24
			if a.Is6() {
				bits = 64
			}
			e.IPs[i] = netip.PrefixFrom(a, bits).String()
		}
	}
	out, err := status.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestStatusIPsAreBareAddresses: every way the pipeline writes
// network-status (ADD, Update attaching, Update rolled back, Republish
// from libcni's cache, Republish of a status holding prefixes, Update
// keeping entries published with prefixes) puts addresses in "ips", not
// the results' prefixes (s5.3.3), IPv6 in canonical form (RFC 5952).
func TestStatusIPsAreBareAddresses(t *testing.T) {
	tests := []struct {
		name     string
		networks string
		// change makes the status written after the ADD; nil for the ADD's.
		change func(t *testing.T, f *fixture)
	}{
		{name: "add", networks: "net-a,net-b"},
		{name: "update attaches", networks: "net-a", change: func(t *testing.T, f *fixture) {
			f.src.pods["demo/web"].Annotations[selection.Annotation] = "net-a,net-b"
			if _, err := f.update(t); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "update rolled back", networks: "net-a", change: func(t *testing.T, f *fixture) {
			f.src.pods["demo/web"].Annotations[selection.Annotation] = "net-b"
			f.cni.fail["ADD net-b"] = errors.New("boom")
			if _, err := f.update(t); cniErr(t, err).Code != codes.AttachFailed {
				t.Fatalf("update: %v, want the attach to fail", err)
			}
		}},
		{name: "republish lost status", networks: "net-a,net-b", change: func(t *testing.T, f *fixture) {
			delete(f.src.pods["demo/web"].Annotations, status.Annotation)
			if wrote, err := f.p.Republish(context.Background(), f.req.ContainerID, f.src.pods["demo/web"]); err != nil || !wrote {
				t.Fatalf("Republish = %v, %v; want the status written", wrote, err)
			}
		}},
		{name: "republish prefixed status", networks: "net-a,net-b", change: func(t *testing.T, f *fixture) {
			pod := f.src.pods["demo/web"]
			pod.Annotations[status.Annotation] = withPrefixes(t, []byte(pod.Annotations[status.Annotation]))
			rec, err := f.p.Records.Load(f.req.ContainerID)
			if err != nil {
				t.Fatal(err)
			}
			if !NeedsUpdate(rec, pod, selection.ParseOptions{}) {
				t.Error("NeedsUpdate = false for a status holding prefixes")
			}
			if wrote, err := f.p.Republish(context.Background(), f.req.ContainerID, pod); err != nil || !wrote {
				t.Fatalf("Republish = %v, %v; want the status written again", wrote, err)
			}
		}},
		{name: "update keeps prefixed entries", networks: "net-a", change: func(t *testing.T, f *fixture) {
			pod := f.src.pods["demo/web"]
			pod.Annotations[status.Annotation] = withPrefixes(t, []byte(pod.Annotations[status.Annotation]))
			pod.Annotations[selection.Annotation] = "net-a,net-c"
			ch, err := f.update(t)
			if err != nil || len(ch.Attached) != 1 {
				t.Fatalf("change %+v err %v", ch, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := addedFixture(t, tt.networks)
			if tt.change != nil {
				f.src.status = nil
				tt.change(t, f)
			}
			if f.src.status == nil {
				t.Fatal("no status written")
			}
			var list []*status.Entry
			if err := json.Unmarshal(f.src.status, &list); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range list {
				for _, s := range e.IPs {
					n++
					a, err := netip.ParseAddr(s)
					if err != nil {
						t.Errorf("%s (%s) ips %q: %v", e.Name, e.Interface, s, err)
					} else if a.String() != s {
						t.Errorf("%s (%s) ips %q, want the canonical %q", e.Name, e.Interface, s, a)
					}
				}
			}
			if n == 0 {
				t.Errorf("no ips in %s", f.src.status)
			}
			golden(t, "status-"+strings.ReplaceAll(tt.name, " ", "-"), f.src.status)
		})
	}
}
