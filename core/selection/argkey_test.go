package selection

import (
	"encoding/json"
	"testing"
)

// delegateArgs is how a delegate reads the keys plexus sets in args.cni:
// encoding/json into tagged fields, as the reference plugins do.
type delegateArgs struct {
	IPs  *json.RawMessage `json:"ips"`
	MAC  *json.RawMessage `json:"mac"`
	GUID *json.RawMessage `json:"infiniband-guid"`
}

// readAs returns the field of ArgKeys that encoding/json fills from key k,
// or "" when it fills none.
func readAs(t testing.TB, k string) string {
	doc, err := json.Marshal(map[string]int{k: 1})
	if err != nil {
		return ""
	}
	var d delegateArgs
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatalf("decoding %s: %v", doc, err)
	}
	switch {
	case d.IPs != nil:
		return "ips"
	case d.MAC != nil:
		return "mac"
	case d.GUID != nil:
		return InfinibandGUIDKey
	}
	return ""
}

// TestArgKeyFoldingCoversEncodingJSON: every key a delegate's
// encoding/json reads as one plexus sets is one plexusArgKey names.
func TestArgKeyFoldingCoversEncodingJSON(t *testing.T) {
	for _, k := range []string{"ips", "IPs", "IPS", "ipſ", "Ips", "mac", "MAC", "Mac", "mAc", "infiniband-guid", "INFINIBAND-GUID", "infiniband-guiD", "ip", "ipss", "macs", "infinibandguid", "infiniband_guid"} {
		want := readAs(t, k)
		got, ok := plexusArgKey(k)
		if want != "" && (!ok || got != want) {
			t.Errorf("encoding/json reads %q as %q; plexusArgKey says %q, %v", k, want, got, ok)
		}
	}
}

// FuzzArgKeyFolding: no key reaches a delegate as "ips", "mac" or
// "infiniband-guid" without plexusArgKey naming it.
func FuzzArgKeyFolding(f *testing.F) {
	for _, k := range []string{"IPs", "ipſ", "MAC", "Infiniband-GUID", "mtu"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		want := readAs(t, k)
		if want == "" {
			return
		}
		if got, ok := plexusArgKey(k); !ok || got != want {
			t.Fatalf("encoding/json reads %q as %q; plexusArgKey says %q, %v", k, want, got, ok)
		}
	})
}
