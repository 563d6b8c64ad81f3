package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/libcni"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/netconf"
)

// Subdirectory chains (libcni since CNI 1.1, NetworkPluginConfsFromFiles):
// a config list in a directory gets, unless it sets
// loadOnlyInlinedPlugins, the plugin configs in <dir>/<network name>/*.conf
// appended, in file name order. plexus inlines them when it reads the
// config, so the record holds the exact chain ADD ran even after the
// files change.

// withSubdirChain inlines the subdirectory chain of a config file in dir.
// A single-plugin conf (it has a top-level "type") has no such chain.
func withSubdirChain(raw []byte, dir string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top["type"] != nil {
		return raw, nil // netconf.Parse reports a bad config
	}
	var inlinedOnly bool
	if v, ok := top["loadOnlyInlinedPlugins"]; ok && json.Unmarshal(v, &inlinedOnly) == nil && inlinedOnly {
		return raw, nil
	}
	var name string
	if err := json.Unmarshal(top["name"], &name); err != nil || names.Network(name) != nil {
		return raw, nil // netconf.Parse reports it; the name is never joined unchecked
	}
	return appendChain(raw, top, dir, name)
}

// withAuxiliaryChain appends the auxiliaryCNIChainName chain in dir.
func (p *Pipeline) withAuxiliaryChain(raw []byte, dir string) ([]byte, error) {
	aux := p.Config.AuxiliaryCNIChainName
	if aux == "" {
		return raw, nil
	}
	c, err := netconf.Parse(raw)
	if err != nil {
		return raw, nil // clusterFromConfig reports it
	}
	list, err := c.ListBytes()
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(list, &top); err != nil {
		return nil, err
	}
	out, err := appendChain(list, top, dir, aux)
	if err != nil {
		return nil, fmt.Errorf("auxiliaryCNIChainName %q: %w", aux, err)
	}
	return out, nil
}

// appendChain appends <dir>/<chain>/*.conf to a config list, then loadOnlyInlinedPlugins.
func appendChain(raw []byte, top map[string]json.RawMessage, dir, chain string) ([]byte, error) {
	extra, err := libcni.NetworkPluginConfsFromFiles(dir, chain)
	if err != nil {
		return nil, fmt.Errorf("subdirectory chain %s/%s: %w", dir, chain, err)
	}
	if len(extra) == 0 {
		return raw, nil
	}
	var plugins []json.RawMessage
	if v, ok := top["plugins"]; ok {
		if err := json.Unmarshal(v, &plugins); err != nil {
			return nil, fmt.Errorf(`"plugins" is not a list: %w`, err)
		}
	}
	for _, pc := range extra {
		plugins = append(plugins, pc.Bytes)
	}
	if top["plugins"], err = json.Marshal(plugins); err != nil {
		return nil, err
	}
	top["loadOnlyInlinedPlugins"] = json.RawMessage("true")
	return json.Marshal(top)
}
