package status

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
)

var update = flag.Bool("update", false, "rewrite golden files")

// results are CNI results of every version, as delegates print them.
var results = map[string]string{
	// s5.3.2.1, s5.3.3.1 rule 2 for results before 0.3.0: ip4/ip6, no interfaces.
	"v020": `{"cniVersion":"0.2.0","ip4":{"ip":"10.1.0.5/24","gateway":"10.1.0.1"},"ip6":{"ip":"fd00::5/64"},"dns":{"nameservers":["10.1.0.53"]}}`,
	// s5.3.3.1 rule 1: only the sandbox interface's addresses.
	"v031": `{"cniVersion":"0.3.1","interfaces":[{"name":"br0","mac":"02:00:00:00:00:01"},{"name":"veth1","mac":"02:00:00:00:00:02"},{"name":"eth1","mac":"02:00:00:00:00:03","sandbox":"/var/run/netns/x"}],
	  "ips":[{"version":"4","address":"10.2.0.1/24","interface":0},{"version":"4","address":"10.2.0.7/24","gateway":"10.2.0.1","interface":2},{"version":"6","address":"fd02::7/64","interface":2}],
	  "dns":{"nameservers":["10.2.0.53"],"domain":"example.org","search":["eng.example.org","example.org"]}}`,
	"v040": `{"cniVersion":"0.4.0","interfaces":[{"name":"net1","mac":"02:00:00:00:00:04","sandbox":"/var/run/netns/x"}],"ips":[{"version":"4","address":"10.4.0.9/16","interface":0}]}`,
	// s5.3.4: a 20-byte InfiniBand address.
	"v100": `{"cniVersion":"1.0.0","interfaces":[{"name":"ib0","mac":"80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22","sandbox":"/var/run/netns/x"}],"ips":[{"address":"5.4.3.2/16","interface":0}]}`,
	// s5.3.3.1 rule 2: no sandbox interface, addresses without an interface.
	"v110-no-sandbox": `{"cniVersion":"1.1.0","interfaces":[{"name":"host0","mac":"02:00:00:00:00:05"}],"ips":[{"address":"10.9.0.2/24","interface":0},{"address":"10.9.0.3/24"},{"address":"10.9.0.4/24","interface":-1}]}`,
}

func TestFromResultS5Golden(t *testing.T) {
	for name, raw := range results {
		t.Run(name, func(t *testing.T) {
			res := parse(t, raw)
			e, err := FromResult("ns/net", "net7", false, res)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name, []*Entry{e})
		})
	}
}

func parse(t *testing.T, raw string) types.Result {
	t.Helper()
	var v struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	res, err := create.Create(v.CNIVersion, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func golden(t *testing.T, name string, entries []*Entry) {
	t.Helper()
	got, err := Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./core/status -update to create it)", err)
	}
	if strings.TrimSpace(string(want)) != string(got) {
		t.Errorf("%s differs from golden:\n%s\nwant:\n%s", name, got, want)
	}
}

// TestS5_2DefaultAndMinimalEntries: the default entry carries default=true;
// a delegate without a result gets a minimal entry (s5.1.1).
func TestS5_2DefaultAndMinimalEntries(t *testing.T) {
	def, err := FromResult("cluster-default", "eth0", true, parse(t, results["v040"]))
	if err != nil {
		t.Fatal(err)
	}
	min, err := FromResult("ns/quiet", "net2", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := min.SetExtra("com.example.note", json.RawMessage(`"enriched"`)); err != nil {
		t.Fatal(err)
	}
	golden(t, "default-and-minimal", []*Entry{def, min})
}

func TestSetExtraS5_3ReservesKeysWithoutPeriod(t *testing.T) {
	e := &Entry{Name: "x"}
	if err := e.SetExtra("gateway", json.RawMessage(`"1.2.3.4"`)); err == nil {
		t.Error("a key without a period must be refused")
	}
	if err := e.SetExtra("com.example.gw", json.RawMessage(`{`)); err == nil {
		t.Error("invalid JSON must be refused")
	}
}

func TestEntryRoundTripKeepsExtraKeys(t *testing.T) {
	in := `{"name":"a","interface":"net1","default":false,"com.example.vlan":100,"org.x.y":{"k":"v"}}`
	var e Entry
	if err := json.Unmarshal([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(e)
	if string(out) != `{"name":"a","interface":"net1","default":false,"com.example.vlan":100,"org.x.y":{"k":"v"}}` {
		t.Errorf("round trip: %s", out)
	}
}

func TestAddressesOn(t *testing.T) {
	addrs, mac, err := AddressesOn(parse(t, results["v031"]))
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 2 || addrs[0].String() != "10.2.0.7" || mac != "02:00:00:00:00:03" {
		t.Errorf("addrs %v mac %s", addrs, mac)
	}
}

func TestMarshalEmpty(t *testing.T) {
	b, _ := Marshal(nil)
	if string(b) != "[]" {
		t.Errorf("%s", b)
	}
}
