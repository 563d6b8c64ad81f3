package status

import (
	"encoding/json"
	"testing"

	"github.com/containernetworking/cni/pkg/types/create"
)

// FuzzFromResult: a result of any version that libcni accepts yields a
// status entry that encodes, "mac" never appears without "interface", and
// "ips" holds addresses (s5.3.3).
func FuzzFromResult(f *testing.F) {
	for _, r := range results {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var v struct {
			CNIVersion string `json:"cniVersion"`
		}
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		res, err := create.Create(v.CNIVersion, []byte(raw))
		if err != nil {
			return
		}
		e, err := FromResult("ns/net", "net1", false, res)
		if err != nil {
			return
		}
		if e.MAC != "" && e.Interface == "" {
			t.Fatalf("mac without interface: %+v", e)
		}
		assertBareAddresses(t, "fuzzed result", e.IPs)
		if _, err := Marshal([]*Entry{e}); err != nil {
			t.Fatal(err)
		}
	})
}
