// Command overrides is a plexus extension for the spec's open question 6
// ("overrides" in the JSON annotation): the selection key
// "io.plexus.overrides" holds top-level delegate config keys to set, and
// the admin's module config lists which keys pods may set:
//
//	selection: {"name": "br", "io.plexus.overrides": {"mtu": 1400}}
//	config:    {"allow": ["mtu", "hairpinMode"]}
//
// In a config list the keys apply to the first plugin.
package main

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/plexus-cni/plexus/sdk"
)

const key = "io.plexus.overrides"

// never lists keys no allow list can open: plexus refuses changes to them.
var never = []string{"type", "name", "cniVersion", "args", "runtimeConfig", "plugins"}

type config struct {
	Allow []string `json:"allow"`
}

func init() { sdk.Register(Module()) }

// Module is the extension's hooks.
func Module() sdk.Module { return sdk.Module{Prepare: prepare} }

func main() {}

func prepare(req *sdk.PrepareRequest) (*sdk.PrepareResponse, error) {
	var cfg config
	if err := req.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	var overrides map[string]json.RawMessage
	if ok, err := req.Key(key, &overrides); err != nil || !ok {
		return nil, sdk.Reject("%q must be an object of delegate config keys", key)
	}
	names := make([]string, 0, len(overrides))
	for k := range overrides {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if slices.Contains(never, k) || !slices.Contains(cfg.Allow, k) {
			return nil, sdk.Reject("%s: key %q may not be overridden (allowed: %v)", key, k, cfg.Allow)
		}
	}
	d, err := sdk.ParseDelegate(req.Config)
	if err != nil {
		return nil, err
	}
	target := d.Plugins()[0]
	for _, k := range names {
		target[k] = overrides[k]
	}
	conf, err := d.Marshal()
	if err != nil {
		return nil, err
	}
	return &sdk.PrepareResponse{Config: conf}, nil
}
