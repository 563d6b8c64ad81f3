package status

import (
	"encoding/json"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// assertBareAddresses fails for an "ips" value that is not an IP address
// in canonical form (s5.3.3; RFC 5952 for IPv6), as consumers parse it
// (net.ParseIP, netip.ParseAddr, EndpointSlice validation).
func assertBareAddresses(t *testing.T, where string, ips []string) {
	t.Helper()
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			t.Errorf("%s: ips value %q is not an address: %v", where, s, err)
		case a.String() != s:
			t.Errorf("%s: ips value %q, want the canonical %q", where, s, a)
		}
	}
}

// TestGoldenStatusIPsAreBareAddresses: every network-status document the
// suites keep as a golden file (under core/, cmd/, policies/, extensions/, tests/) has bare
// addresses in "ips" (s5.3.3).
func TestGoldenStatusIPsAreBareAddresses(t *testing.T) {
	root := filepath.Join("..", "..")
	var docs []string
	for _, dir := range []string{"core", "cmd", "policies", "extensions", "tests"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.Contains(d.Name(), ".golden") && statusDocument(t, path) != nil {
				docs = append(docs, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The golden files of the status and pipeline packages are found, so
	// the walk is not vacuous.
	for _, dir := range []string{"core/status/testdata", "core/pipeline/testdata"} {
		found := false
		for _, d := range docs {
			found = found || strings.Contains(filepath.ToSlash(d), dir+"/")
		}
		if !found {
			t.Errorf("no network-status golden file found in %s", dir)
		}
	}
	for _, path := range docs {
		rel, _ := filepath.Rel(root, path)
		t.Run(filepath.ToSlash(rel), func(t *testing.T) {
			for i, e := range statusDocument(t, path) {
				var ips []string
				if raw, ok := e["ips"]; ok {
					if err := json.Unmarshal(raw, &ips); err != nil {
						t.Fatalf("entry %d: ips: %v", i, err)
					}
				}
				assertBareAddresses(t, "entry "+string(e["name"]), ips)
			}
		})
	}
}

// statusDocument is the file's entries when it is a network-status
// document (s5: a list of maps, each with "name" and "default"), else nil.
func statusDocument(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(b, &list) != nil || len(list) == 0 {
		return nil
	}
	for _, e := range list {
		var name string
		var def bool
		if json.Unmarshal(e["name"], &name) != nil || json.Unmarshal(e["default"], &def) != nil {
			return nil
		}
	}
	return list
}

// TestFromResultIPsAreBareAddresses: "ips" holds the addresses of the
// result's prefixes, IPv6 in canonical form, whatever the result's
// version and spelling (s5.3.3).
func TestFromResultIPsAreBareAddresses(t *testing.T) {
	tests := []struct {
		name, result string
		want         []string
	}{
		{"v4", `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"10.31.0.2/24","interface":0}]}`, []string{"10.31.0.2"}},
		{"v4 host route", `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"10.31.0.2/32","interface":0}]}`, []string{"10.31.0.2"}},
		{"dual stack", `{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"10.31.0.2/24","interface":0},{"address":"fd00:31::2/64","interface":0}]}`, []string{"10.31.0.2", "fd00:31::2"}},
		{"v6 not canonical", `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"FD00:0031:0000:0000:0000:0000:0000:0002/64","interface":0}]}`, []string{"fd00:31::2"}},
		{"v6 longest zero run", `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"2001:db8:0:0:1:0:0:1/64","interface":0}]}`, []string{"2001:db8::1:0:0:1"}},
		{"v4-mapped v6", `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"::ffff:10.31.0.2/120","interface":0}]}`, []string{"10.31.0.2"}},
		{"0.2.0 ip4 and ip6", `{"cniVersion":"0.2.0","ip4":{"ip":"10.31.0.2/24"},"ip6":{"ip":"fd00::2/64"}}`, []string{"10.31.0.2", "fd00::2"}},
		{"0.4.0", `{"cniVersion":"0.4.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"version":"4","address":"10.31.0.2/16","interface":0}]}`, []string{"10.31.0.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := FromResult("ns/net", "net1", false, parse(t, tt.result))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.IPs, tt.want) {
				t.Errorf("ips %q, want %q", e.IPs, tt.want)
			}
			assertBareAddresses(t, tt.name, e.IPs)
		})
	}
}

// TestBareIPsRewritesPrefixes: an entry published with prefixes in "ips"
// gets their addresses; addresses and what is neither stay as they are.
func TestBareIPsRewritesPrefixes(t *testing.T) {
	tests := []struct {
		name    string
		ips     []string
		want    []string
		changed bool
	}{
		{"v4 prefix", []string{"10.31.0.2/24"}, []string{"10.31.0.2"}, true},
		{"v6 prefix", []string{"fd00:31::2/64"}, []string{"fd00:31::2"}, true},
		{"v6 prefix not canonical", []string{"FD00:31:0::2/64"}, []string{"fd00:31::2"}, true},
		{"v4-mapped prefix", []string{"::ffff:10.31.0.2/120"}, []string{"10.31.0.2"}, true},
		{"mixed", []string{"10.31.0.2", "fd00:31::2/64"}, []string{"10.31.0.2", "fd00:31::2"}, true},
		{"addresses", []string{"10.31.0.2", "fd00:31::2"}, []string{"10.31.0.2", "fd00:31::2"}, false},
		{"neither", []string{"not-an-ip"}, []string{"not-an-ip"}, false},
		{"none", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Entry{Name: "ns/net", IPs: tt.ips}
			if changed := e.BareIPs(); changed != tt.changed {
				t.Errorf("BareIPs() = %v, want %v", changed, tt.changed)
			}
			if !reflect.DeepEqual(e.IPs, tt.want) {
				t.Errorf("ips %q, want %q", e.IPs, tt.want)
			}
		})
	}
}
