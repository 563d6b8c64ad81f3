// Command vlan is a plexus extension owning "com.example.": the selection
// key "com.example.vlan" (an integer, 1-4094) sets the VLAN of the
// attachment's bridge ("vlan") or vlan ("vlanId") plugin, the keys those
// reference plugins read.
package main

import (
	"encoding/json"
	"sort"

	"github.com/plexus-cni/plexus/sdk"
)

const vlanKey = "com.example.vlan"

// vlanField is the config key each supported plugin type reads its VLAN
// ID from (containernetworking/plugins: bridge.go "vlan", vlan.go "vlanId").
var vlanField = map[string]string{"bridge": "vlan", "vlan": "vlanId"}

func init() { sdk.Register(Module()) }

// Module is the extension's hooks.
func Module() sdk.Module { return sdk.Module{Prepare: prepare} }

func main() {}

func prepare(req *sdk.PrepareRequest) (*sdk.PrepareResponse, error) {
	if err := onlyKnownKeys(req.Keys); err != nil {
		return nil, err
	}
	id, err := vlanID(req)
	if err != nil {
		return nil, err
	}
	d, err := sdk.ParseDelegate(req.Config)
	if err != nil {
		return nil, err
	}
	for _, p := range d.Plugins() {
		if field, ok := vlanField[p.Type()]; ok {
			if err := p.Set(field, id); err != nil {
				return nil, err
			}
			conf, err := d.Marshal()
			return &sdk.PrepareResponse{Config: conf}, err
		}
	}
	return nil, sdk.Reject("%s: network %s/%s has no bridge or vlan plugin (plugin types: %v)",
		vlanKey, req.Network.Namespace, req.Network.Name, types(d))
}

func onlyKnownKeys(keys map[string]json.RawMessage) error {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k != vlanKey {
			return sdk.Reject("unknown key %q (this extension reads only %q)", k, vlanKey)
		}
	}
	return nil
}

func vlanID(req *sdk.PrepareRequest) (int, error) {
	var f float64
	ok, err := req.Key(vlanKey, &f)
	if !ok {
		return 0, sdk.Reject("%s is missing", vlanKey)
	}
	if err != nil || f != float64(int(f)) {
		return 0, sdk.Reject("%s must be an integer, got %s", vlanKey, req.Keys[vlanKey])
	}
	if f < 1 || f > 4094 {
		return 0, sdk.Reject("%s must be between 1 and 4094, got %d", vlanKey, int(f))
	}
	return int(f), nil
}

func types(d *sdk.Delegate) []string {
	var out []string
	for _, p := range d.Plugins() {
		out = append(out, p.Type())
	}
	return out
}
