// Package netconf reads, checks and edits CNI network configurations (a
// single-plugin conf or a conflist) as JSON, keeping every key and number
// the author wrote.
package netconf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/containernetworking/cni/libcni"

	"github.com/plexus-cni/plexus/core/names"
)

// MaxBytes bounds a delegate configuration; real ones are a few KiB.
const MaxBytes = 1 << 20

// Conf is a parsed CNI configuration; for a single-plugin conf the one
// plugin is the top level, so edits apply to whichever form it has.
type Conf struct {
	top     map[string]any
	plugins []map[string]any
	list    bool
}

// Parse decodes and checks a conf or conflist. The name may be absent
// (s3.4.2 injects it); whatever becomes a file name later is checked here.
func Parse(raw []byte) (*Conf, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("CNI config is %d bytes, over the limit of %d", len(raw), MaxBytes)
	}
	top, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("CNI config is not a JSON object: %w", err)
	}
	c := &Conf{top: top}
	if p, ok := top["plugins"]; ok {
		if err := c.readPlugins(p); err != nil {
			return nil, err
		}
	} else {
		c.plugins = []map[string]any{top}
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("null")
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the object")
	}
	return m, nil
}

func (c *Conf) readPlugins(p any) error {
	list, ok := p.([]any)
	if !ok || len(list) == 0 {
		return fmt.Errorf(`CNI config list: "plugins" must be a non-empty list`)
	}
	c.list = true
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("CNI config list: plugin %d is not an object", i)
		}
		c.plugins = append(c.plugins, m)
	}
	return nil
}

func (c *Conf) check() error {
	if v, ok := c.top["cniVersion"]; ok {
		if _, isStr := v.(string); !isStr {
			return fmt.Errorf(`CNI config: "cniVersion" must be a string`)
		}
	}
	if v, ok := c.top["name"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return fmt.Errorf(`CNI config: "name" must be a string`)
		}
		if s != "" {
			if err := names.Network(s); err != nil {
				return fmt.Errorf("CNI config: %w", err)
			}
		}
	}
	for i, p := range c.plugins {
		if err := checkPlugin(p); err != nil {
			if c.list {
				return fmt.Errorf("CNI config list: plugin %d: %w", i, err)
			}
			return fmt.Errorf("CNI config: %w", err)
		}
	}
	return nil
}

func checkPlugin(p map[string]any) error {
	t, _ := p["type"].(string)
	if err := names.PluginType(t); err != nil {
		return fmt.Errorf(`"type": %w`, err)
	}
	if ipam, ok := p["ipam"]; ok {
		m, isObj := ipam.(map[string]any)
		if !isObj {
			return fmt.Errorf(`"ipam" must be an object`)
		}
		if it, ok := m["type"]; ok {
			s, _ := it.(string)
			if err := names.PluginType(s); err != nil {
				return fmt.Errorf(`"ipam.type": %w`, err)
			}
		}
	}
	return nil
}

// IsList reports whether the config is a conflist.
func (c *Conf) IsList() bool { return c.list }

// Name is the network name, "" when absent.
func (c *Conf) Name() string { s, _ := c.top["name"].(string); return s }

// CNIVersion is the config's cniVersion, "" when absent.
func (c *Conf) CNIVersion() string { s, _ := c.top["cniVersion"].(string); return s }

// PluginTypes lists the plugin types in invocation order.
func (c *Conf) PluginTypes() []string {
	out := make([]string, len(c.plugins))
	for i, p := range c.plugins {
		out[i], _ = p["type"].(string)
	}
	return out
}

// IPAMTypes lists the IPAM types of the plugins that have one.
func (c *Conf) IPAMTypes() []string {
	var out []string
	for _, p := range c.plugins {
		if m, ok := p["ipam"].(map[string]any); ok {
			if s, ok := m["type"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// HasCapability reports whether any plugin declares capability cap.
func (c *Conf) HasCapability(cap string) bool {
	return slices.ContainsFunc(c.plugins, func(p map[string]any) bool {
		m, ok := p["capabilities"].(map[string]any)
		return ok && m[cap] == true
	})
}

// SetName sets the network name (s3.4.2).
func (c *Conf) SetName(name string) error {
	if err := names.Network(name); err != nil {
		return err
	}
	c.top["name"] = name
	return nil
}

// InjectArgs sets "args": {"cni": {k: v}} in every plugin, keeping the
// author's other args (s4.1.2.1.3.2, s4.1.2.1.4.2).
func (c *Conf) InjectArgs(cniArgs map[string]any) error {
	if len(cniArgs) == 0 {
		return nil
	}
	for i, p := range c.plugins {
		args, err := objectAt(p, "args")
		if err != nil {
			return fmt.Errorf("plugin %d: %w", i, err)
		}
		cni, err := objectAt(args, "cni")
		if err != nil {
			return fmt.Errorf("plugin %d: args: %w", i, err)
		}
		maps.Copy(cni, cniArgs)
	}
	return nil
}

// SetPluginKey sets a top-level key in every plugin ("deviceID").
func (c *Conf) SetPluginKey(key string, value any) {
	for _, p := range c.plugins {
		p[key] = value
	}
}

// objectAt returns m[key] as an object, creating it when absent.
func objectAt(m map[string]any, key string) (map[string]any, error) {
	v, ok := m[key]
	if !ok || v == nil {
		o := map[string]any{}
		m[key] = o
		return o, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%q is not an object", key)
	}
	return o, nil
}

// Bytes encodes the config in the form it was written in.
func (c *Conf) Bytes() ([]byte, error) {
	return json.Marshal(c.top)
}

// ListBytes encodes the config as a conflist: a single-plugin conf becomes
// a list of one, with its list-level keys carried to the top.
func (c *Conf) ListBytes() ([]byte, error) {
	if c.list {
		return json.Marshal(c.top)
	}
	l := map[string]any{"plugins": []any{c.top}}
	for _, k := range []string{"name", "cniVersion", "disableCheck", "disableGC"} {
		if v, ok := c.top[k]; ok {
			l[k] = v
		}
	}
	return json.Marshal(l)
}

// ConfList parses raw (conf or conflist) into the list libcni runs.
// libcni's NetworkConfFromBytes yields no plugins for a single-plugin conf,
// so a conf is first wrapped as a list of one.
func ConfList(raw []byte) (*libcni.NetworkConfigList, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return c.List()
}

// List is the parsed config as the list libcni runs.
func (c *Conf) List() (*libcni.NetworkConfigList, error) {
	if c.Name() == "" {
		return nil, fmt.Errorf(`CNI config has no "name"`)
	}
	lb, err := c.ListBytes()
	if err != nil {
		return nil, err
	}
	list, err := libcni.NetworkConfFromBytes(lb)
	if err != nil {
		return nil, err
	}
	if len(list.Plugins) == 0 {
		return nil, fmt.Errorf("CNI config %q has no plugins", c.Name())
	}
	return list, nil
}
