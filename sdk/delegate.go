package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Delegate is a delegate config or config list decoded for editing. Keys
// are kept as raw JSON, so values the module does not touch pass through
// unchanged (their key order is not kept).
type Delegate struct {
	top     map[string]json.RawMessage
	plugins []Plugin
	list    bool
}

// Plugin is one plugin config: a single config, or one of a list's plugins.
type Plugin map[string]json.RawMessage

// ParseDelegate decodes a PrepareRequest's Config.
func ParseDelegate(raw json.RawMessage) (*Delegate, error) {
	d := &Delegate{}
	if err := json.Unmarshal(raw, &d.top); err != nil || d.top == nil {
		return nil, errors.New("delegate config is not a JSON object")
	}
	plugins, ok := d.top["plugins"]
	if !ok {
		d.plugins = []Plugin{Plugin(d.top)}
		return d, nil
	}
	d.list = true
	if err := json.Unmarshal(plugins, &d.plugins); err != nil {
		return nil, fmt.Errorf("delegate config plugins: %w", err)
	}
	return d, nil
}

// IsList reports a config list.
func (d *Delegate) IsList() bool { return d.list }

// Plugins are the plugin configs in order; a single config is one plugin.
func (d *Delegate) Plugins() []Plugin { return d.plugins }

// Marshal encodes the edited config.
func (d *Delegate) Marshal() (json.RawMessage, error) {
	if d.list {
		b, err := json.Marshal(d.plugins)
		if err != nil {
			return nil, err
		}
		d.top["plugins"] = b
	}
	return json.Marshal(d.top)
}

// Type is the plugin's "type".
func (p Plugin) Type() string {
	var t string
	_ = json.Unmarshal(p["type"], &t)
	return t
}

// Set sets a key to v encoded as JSON.
func (p Plugin) Set(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("key %q: %w", key, err)
	}
	p[key] = b
	return nil
}
