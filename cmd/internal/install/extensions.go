package install

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/extensions/copier"
)

// DefaultExtensionsSrc is where extension images put NAME/module.wasm.
const DefaultExtensionsSrc = "/opt/plexus/extensions"

// maxExtensionModules bounds the modules one config names, as a PlexusNode does.
const maxExtensionModules = 64

// extensionName is a module's directory name: never one that walks out.
var extensionName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// extModule is one module --config's "extensions" names.
type extModule struct {
	name  string         // NAME of ExtensionsSrcDir/NAME/module.wasm
	entry map[string]any // its entry in "modules", path included
}

// checkExtensions checks the ExtensionsDir options and --config's modules.
func (o *Options) checkExtensions() ([]extModule, error) {
	if o.ExtensionsDir == "" {
		return nil, nil
	}
	if o.ConfigOnly || o.BinariesOnly {
		return nil, fmt.Errorf("extensions dir %q: only for an installer that writes plexus's config for the plugin", o.ExtensionsDir)
	}
	for name, p := range map[string]string{"extensions dir": o.ExtensionsDir, "extensions source dir": o.ExtensionsSrcDir} {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s %q: want an absolute path", name, p)
		}
	}
	if within(o.ExtensionsDir, o.ExtensionsSrcDir) {
		return nil, fmt.Errorf("extensions dir %q lies in the extensions source dir %q: give it a directory of its own", o.ExtensionsDir, o.ExtensionsSrcDir)
	}
	for name, d := range map[string]string{"extensions source dir": o.ExtensionsSrcDir, "conf dir": o.ConfDir, "default conf dir": o.DefaultConfDir, "bin dir": o.BinDir, "policy dir": o.PolicyDir} {
		if d != "" && within(d, o.ExtensionsDir) {
			return nil, fmt.Errorf("extensions dir %q holds the %s %q: give it a directory of its own", o.ExtensionsDir, name, d)
		}
	}
	raw, ok := o.Extra["extensions"]
	if !ok {
		return nil, nil
	}
	ext, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New(`--config's "extensions": want an object`)
	}
	list, ok := ext["modules"].([]any)
	if !ok && ext["modules"] != nil {
		return nil, errors.New(`--config's "extensions.modules": want a list`)
	}
	if len(list) > maxExtensionModules {
		return nil, fmt.Errorf(`--config's "extensions.modules": %d modules, at most %d`, len(list), maxExtensionModules)
	}
	var mods []extModule
	for i, m := range list {
		mod, err := o.extModule(m)
		if err != nil {
			return nil, fmt.Errorf(`--config's "extensions.modules"[%d]: %w`, i, err)
		}
		if slices.ContainsFunc(mods, func(x extModule) bool { return x.name == mod.name }) {
			return nil, fmt.Errorf(`--config's "extensions.modules"[%d]: module %q named twice`, i, mod.name)
		}
		mods = append(mods, mod)
	}
	return mods, nil
}

// extModule reads one entry of "modules".
func (o *Options) extModule(m any) (extModule, error) {
	entry, ok := m.(map[string]any)
	if !ok {
		return extModule{}, errors.New("want an object")
	}
	path, _ := entry["path"].(string)
	name := filepath.Base(filepath.Dir(path))
	if !extensionName.MatchString(name) || path != filepath.Join(o.ExtensionsSrcDir, name, copier.ModuleFile) {
		return extModule{}, fmt.Errorf("path %q: want %s with NAME of lower-case letters, digits, '.', '_' or '-' (the installer copies it to %s)",
			path, filepath.Join(o.ExtensionsSrcDir, "NAME", copier.ModuleFile), filepath.Join(o.ExtensionsDir, "NAME", copier.ModuleFile))
	}
	return extModule{name: name, entry: entry}, nil
}

// InstallExtensions copies each module --config's "extensions" names to
// ExtensionsDir/NAME/module.wasm, loaded as the plugin would (one at a
// time, to bound memory) before the rename: the plugin fails every call on
// a module it cannot load. A failing module is logged, reported and left
// out of the config. Only a failure of ExtensionsDir itself is returned.
func (in *Installer) InstallExtensions(ctx context.Context) error {
	if in.o.ExtensionsDir == "" {
		return nil
	}
	if err := os.MkdirAll(in.o.ExtensionsDir, 0o755); err != nil {
		return fmt.Errorf("extensions dir: %w", err)
	}
	cands := make([]*candidate, len(in.ext))
	cache := in.extCacheDir()
	for i, m := range in.ext {
		c := &candidate{extModule: m, dst: filepath.Join(in.o.ExtensionsDir, m.name, copier.ModuleFile)}
		cands[i] = c
		defer c.discard()
		if c.err = c.stage(ctx, in.o.ExtensionsSrcDir, cache); c.err != nil && c.tmp != "" {
			// A refusal names the source, not the copy.
			c.err = errors.New(strings.ReplaceAll(c.err.Error(), c.tmp, filepath.Join(in.o.ExtensionsSrcDir, m.name, copier.ModuleFile)))
		}
	}
	refuseClashes(ctx, cands)
	var passed []any
	var nodes []extensions.ModuleState
	keep := map[string]bool{}
	for _, c := range cands {
		if c.err == nil {
			c.err = os.Rename(c.tmp, c.dst)
		}
		c.state.Path = c.dst
		if c.err != nil {
			c.state.Loaded, c.state.Err = false, c.err.Error()
			in.o.Log.Warn("refused extension module: left out of plexus's config", "module", c.name, "err", c.err)
		} else {
			keep[c.name] = true
			passed = append(passed, c.hostEntry())
			in.o.Log.Info("installed extension module", "module", c.name, "path", c.dst, "sha256", c.state.SHA256)
		}
		nodes = append(nodes, c.state)
	}
	if err := in.pruneExtensions(keep); err != nil {
		return err
	}
	var cfg map[string]any
	if raw, ok := in.o.Extra["extensions"].(map[string]any); ok {
		cfg = map[string]any{}
		maps.Copy(cfg, raw)
		cfg["modules"] = append([]any{}, passed...)
	}
	in.warmExtensions(ctx, cache, passed)
	in.mu.Lock()
	in.extConfig, in.extNodes = cfg, nodes
	in.mu.Unlock()
	if in.o.OnChange != nil {
		in.o.OnChange()
	}
	return nil
}

// extCacheDir is the plugin's compilation cache, "" unless absolute.
func (in *Installer) extCacheDir() string {
	ext, _ := in.o.Extra["extensions"].(map[string]any)
	dir, _ := ext["cacheDir"].(string)
	if dir == "" {
		base, _ := in.o.Extra["cacheDir"].(string)
		dir = filepath.Join(cmp.Or(base, config.DefaultCacheDir), "extensions")
	}
	if !filepath.IsAbs(dir) {
		return ""
	}
	return dir
}

// warmExtensions checks that the cache serves the installed modules, so
// the plugin's first calls do not compile; a failure is only logged.
func (in *Installer) warmExtensions(ctx context.Context, dir string, installed []any) {
	if dir == "" {
		return
	}
	for _, m := range installed {
		p := m.(map[string]any)["path"].(string)
		if _, err := extensions.Warm(ctx, dir, p); err != nil {
			in.o.Log.Warn("warming the extensions' compilation cache", "dir", dir, "module", p, "err", err)
			return
		}
	}
	if len(installed) > 0 {
		in.o.Log.Info("warmed the extensions' compilation cache", "dir", dir, "modules", len(installed))
	}
}

// candidate is one module on its way to the host.
type candidate struct {
	extModule
	dst, tmp string
	mc       extensions.ModuleConfig // at tmp
	state    extensions.ModuleState  // for the node's PlexusNode
	err      error
}

// hostEntry is the module's entry in the plugin's config.
func (c *candidate) hostEntry() map[string]any {
	entry := maps.Clone(c.entry)
	entry["path"] = c.dst
	return entry
}

// stage copies the module beside dst and loads the copy alone, compiling
// it into cache (keyed by content, so the installed copy hits it).
func (c *candidate) stage(ctx context.Context, srcDir, cache string) error {
	var err error
	if c.tmp, err = copyModule(srcDir, c.name, c.dst); err != nil {
		return err
	}
	entry := c.hostEntry()
	entry["path"] = c.tmp
	raw, err := json.Marshal(map[string]any{"extensions": map[string]any{"modules": []any{entry}}})
	if err != nil {
		return err
	}
	cfg, err := extensions.ParseConfig(raw)
	if err != nil {
		return err
	}
	c.mc = cfg.Modules[0]
	h, err := extensions.New(ctx, extensions.Config{Modules: cfg.Modules, Isolate: true, CacheDir: cache})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	if err := h.LoadAll(ctx); err != nil {
		return err
	}
	c.state = h.Modules()[0]
	if c.state.Name == c.tmp { // no declaration read: the host names it by path
		c.state.Name = ""
	}
	if c.state.Err != "" {
		return errors.New(c.state.Err)
	}
	return nil
}

// discard removes the copy if it was not renamed into place.
func (c *candidate) discard() {
	if c.tmp != "" {
		os.Remove(c.tmp)
	}
}

// refuseClashes refuses modules whose name or keys clash with an earlier one.
func refuseClashes(ctx context.Context, cands []*candidate) {
	var staged []*candidate
	var mods []extensions.ModuleConfig
	for _, c := range cands {
		if c.err == nil {
			staged = append(staged, c)
			mods = append(mods, c.mc)
		}
	}
	if len(mods) < 2 {
		return
	}
	h, err := extensions.New(ctx, extensions.Config{Modules: mods, Isolate: true})
	if err != nil {
		for _, c := range staged {
			c.err = err
		}
		return
	}
	defer h.Close(ctx)
	for i, st := range h.Modules() {
		if st.Err != "" {
			c := staged[i]
			c.err = errors.New(strings.ReplaceAll(st.Err, c.tmp, filepath.Join(filepath.Dir(c.dst), copier.ModuleFile)))
		}
	}
}

// copyModule copies a module, at most MaxModuleBytes, to a file beside dst.
func copyModule(srcDir, name, dst string) (string, error) {
	src, err := openModule(srcDir, name)
	if err != nil {
		return "", err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	tmp, n, err := writeTemp(dst, io.LimitReader(src, extensions.MaxModuleBytes+1), 0o644)
	if err == nil && n > extensions.MaxModuleBytes {
		os.Remove(tmp)
		err = fmt.Errorf("more than the %d bytes plexus loads", extensions.MaxModuleBytes)
	}
	if err != nil {
		return "", fmt.Errorf("copying %s: %w", filepath.Join(srcDir, name, copier.ModuleFile), err)
	}
	return tmp, nil
}

// openModule opens a module, refusing symlinks: never a file elsewhere on the node.
func openModule(srcDir, name string) (*os.File, error) {
	root, err := os.OpenRoot(srcDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel := filepath.Join(name, copier.ModuleFile)
	for _, p := range []string{name, rel} {
		st, err := root.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(srcDir, p), err)
		}
		if want := p == name; st.Mode()&fs.ModeSymlink != 0 || st.IsDir() != want || !want && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: a %s, want a regular %s", filepath.Join(srcDir, p), st.Mode().Type(), map[bool]string{true: "directory", false: "file"}[want])
		}
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", filepath.Join(srcDir, rel))
	}
	return f, nil
}

// pruneExtensions removes the modules of every NAME not in keep, nothing else.
func (in *Installer) pruneExtensions(keep map[string]bool) error {
	entries, err := os.ReadDir(in.o.ExtensionsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("extensions dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !extensionName.MatchString(e.Name()) || keep[e.Name()] {
			continue
		}
		dir := filepath.Join(in.o.ExtensionsDir, e.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			if f.Name() == copier.ModuleFile || strings.HasPrefix(f.Name(), "."+copier.ModuleFile+".tmp-") {
				if err := os.Remove(filepath.Join(dir, f.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		_ = os.Remove(dir) // only if empty
		in.o.Log.Info("removed an extension module the config no longer names", "path", filepath.Join(dir, copier.ModuleFile))
	}
	return errors.Join(errs...)
}

// uninstallExtensions removes every module and ExtensionsDir if empty.
func (in *Installer) uninstallExtensions() error {
	if in.o.ExtensionsDir == "" {
		return nil
	}
	err := in.pruneExtensions(nil)
	_ = os.Remove(in.o.ExtensionsDir)
	return err
}

// extensionsConfig is the plugin's "extensions" key once installed, or nil.
func (in *Installer) extensionsConfig() map[string]any {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.extConfig
}

// NodeExtensions is each module's state for the node's PlexusNode.
func (in *Installer) NodeExtensions() []extensions.ModuleState {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.extNodes)
}
