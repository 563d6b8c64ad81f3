package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/sdk/abi"
)

// loadExtensions reads the config and the modules' declarations as plexus
// does at start (extensions.New).
func (b *builder) loadExtensions(ctx context.Context) {
	x := &b.r.Extensions
	if b.opts.ExtensionsFile == "" {
		return
	}
	x.Given, x.File = true, b.opts.ExtensionsFile
	cfg, err := readExtensionsConfig(b.opts.ExtensionsFile)
	if err != nil {
		x.Error = err.Error()
		b.problem("extensions: %v", err)
		return
	}
	x.UnownedKeys = cmp.Or(cfg.UnownedKeys, extensions.PolicyIgnore)
	cfg.CacheDir = "" // explain compiles nothing; never create the node's cache
	h, err := extensions.New(ctx, cfg)
	if err != nil {
		x.Error = err.Error()
		b.problem("extensions: %v: the thin plugin fails every ADD with this config; plexusd refuses the failing module and serves with the rest", err)
		return
	}
	b.ext = h
	for i, d := range h.Declarations() {
		x.Modules = append(x.Modules, Module{Name: d.Name, Path: cfg.Modules[i].Path, Prefixes: d.Prefixes, Hooks: d.Hooks})
	}
}

// readExtensionsConfig takes extensions.Config ({"modules": [...]}) or a
// plugin config holding it under "extensions".
func readExtensionsConfig(path string) (extensions.Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return extensions.Config{}, fmt.Errorf("reading extensions config: %w", err)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return extensions.Config{}, fmt.Errorf("extensions config %s: %w", path, err)
	}
	var cfg extensions.Config
	if _, ok := probe["extensions"]; ok {
		cfg, err = extensions.ParseConfig(raw)
	} else {
		err = config.Unmarshal(raw, &cfg)
	}
	if err != nil {
		return cfg, fmt.Errorf("extensions config %s: %w", path, err)
	}
	return cfg, nil
}

// ownKey says which module owns a reverse-domain key (s4.1.2.1) of a, and
// what the plan did with it.
func (b *builder) ownKey(out *Attachment, key string, a *pipeline.Planned) Key {
	k := Key{Key: key}
	at := fmt.Sprintf("selection element %d (%s): key %q", out.Index, out.Network, key)
	if b.ext == nil {
		k.Outcome = "no extensions config given (--extensions): without extensions plexus ignores the key"
		if b.r.Extensions.Given {
			k.Outcome = "the extensions config did not load"
		}
		b.warn("%s: %s", at, k.Outcome)
		return k
	}
	for _, d := range b.ext.Declarations() {
		for _, p := range d.Prefixes {
			if !extensions.Owns(p, key) {
				continue
			}
			k.Module, k.Prefix = d.Name, p
			k.Outcome = fmt.Sprintf("module %q (prefix %q) prepares the attachment with it", d.Name, p)
			if !d.Has(abi.HookPrepare) {
				k.Outcome = fmt.Sprintf("module %q (prefix %q) owns it but has no prepare hook: the key does not change the attachment", d.Name, p)
				b.warn("%s: %s", at, k.Outcome)
			}
			return k
		}
	}
	if _, ignored := a.Ignored[key]; ignored || b.r.Extensions.UnownedKeys != extensions.PolicyFail {
		k.Outcome = "no extension owns it: ignored with a warning (it would fail with unownedKeys: fail)"
		b.warn("%s: %s", at, k.Outcome)
		return k
	}
	k.Outcome = "no extension owns it: the ADD fails (unownedKeys: fail)"
	return k
}
