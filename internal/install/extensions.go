package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/internal/extcopy"
	"github.com/plexus-cni/plexus/internal/plexusapi"
)

// DefaultExtensionsSrc is where extension images' volumes (or the init
// containers' emptyDirs) put each module: NAME/module.wasm.
const DefaultExtensionsSrc = "/opt/plexus/extensions"

// maxExtensionModules bounds the modules one config names: as many as a
// PlexusNode reports.
const maxExtensionModules = 64

// extensionName is the allow-list of a module's directory name: a plain
// name that never walks out of the source or the host directory.
var extensionName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// extModule is one module --config's "extensions" names.
type extModule struct {
	name  string         // NAME of ExtensionsSrcDir/NAME/module.wasm
	entry map[string]any // its entry in "modules", path included
}

// extState is what InstallExtensions did: the plugin's "extensions" key
// (the modules that passed, at their host paths) and each module's state.
type extState struct {
	mu     sync.Mutex
	config map[string]any
	nodes  []plexusapi.NodeExtension
}

// checkExtensions checks the options of an installer that copies
// extension modules to the host (ExtensionsDir): --config's "extensions"
// must name each module at its path in the image,
// ExtensionsSrcDir/NAME/module.wasm; the installer writes the host path.
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
	// The installer removes modules there that the config does not name.
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

// extModule reads one entry of "modules": its path must be
// ExtensionsSrcDir/NAME/module.wasm with NAME a plain name.
func (o *Options) extModule(m any) (extModule, error) {
	entry, ok := m.(map[string]any)
	if !ok {
		return extModule{}, errors.New("want an object")
	}
	path, _ := entry["path"].(string)
	name := filepath.Base(filepath.Dir(path))
	if !extensionName.MatchString(name) || path != filepath.Join(o.ExtensionsSrcDir, name, extcopy.ModuleFile) {
		return extModule{}, fmt.Errorf("path %q: want %s with NAME of lower-case letters, digits, '.', '_' or '-' (the installer copies it to %s)",
			path, filepath.Join(o.ExtensionsSrcDir, "NAME", extcopy.ModuleFile), filepath.Join(o.ExtensionsDir, "NAME", extcopy.ModuleFile))
	}
	return extModule{name: name, entry: entry}, nil
}

// InstallExtensions copies each module --config's "extensions" names
// from ExtensionsSrcDir to ExtensionsDir/NAME/module.wasm, checking each
// as plexusctl ext pack and plexusd do (extensions.Check) before it is
// renamed into place, so the plugin never reads a module that failed or a
// part of one. A module that fails is refused, logged, reported in the
// node's PlexusNode, and left out of the plugin's config; the others are
// installed. Modules ExtensionsDir holds that are not installed now are
// removed. Only a failure of ExtensionsDir itself is returned.
func (in *Installer) InstallExtensions(ctx context.Context) error {
	if in.o.ExtensionsDir == "" {
		return nil
	}
	if err := os.MkdirAll(in.o.ExtensionsDir, 0o755); err != nil {
		return fmt.Errorf("extensions dir: %w", err)
	}
	var passed []any
	var nodes []plexusapi.NodeExtension
	keep := map[string]bool{}
	for _, m := range in.ext {
		dst := filepath.Join(in.o.ExtensionsDir, m.name, extcopy.ModuleFile)
		node, err := in.installModule(ctx, m.name, dst)
		node.Path = dst
		if err != nil {
			node.Error = err.Error()
			in.o.Log.Warn("refused extension module: left out of plexus's config", "module", m.name, "err", err)
		} else {
			keep[m.name] = true
			entry := map[string]any{}
			for k, v := range m.entry {
				entry[k] = v
			}
			entry["path"] = dst
			passed = append(passed, entry)
			in.o.Log.Info("installed extension module", "module", m.name, "path", dst, "sha256", node.SHA256)
		}
		nodes = append(nodes, node)
	}
	if err := in.pruneExtensions(keep); err != nil {
		return err
	}
	var cfg map[string]any
	if raw, ok := in.o.Extra["extensions"].(map[string]any); ok {
		cfg = map[string]any{}
		for k, v := range raw {
			cfg[k] = v
		}
		cfg["modules"] = append([]any{}, passed...)
	}
	in.warmExtensions(ctx, cfg, passed)
	in.extState.mu.Lock()
	in.extState.config, in.extState.nodes = cfg, nodes
	in.extState.mu.Unlock()
	if in.o.OnChange != nil {
		in.o.OnChange()
	}
	return nil
}

// warmExtensions fills the compilation cache the config names
// ("cacheDir") with the installed modules, so that the plugin's first
// calls load compiled code instead of compiling. A failure only costs
// those calls the compilation: it is logged.
func (in *Installer) warmExtensions(ctx context.Context, cfg map[string]any, installed []any) {
	dir, _ := cfg["cacheDir"].(string)
	if dir == "" || !filepath.IsAbs(dir) || len(installed) == 0 {
		return
	}
	var paths []string
	for _, m := range installed {
		paths = append(paths, m.(map[string]any)["path"].(string))
	}
	if _, err := extensions.Warm(ctx, dir, paths...); err != nil {
		in.o.Log.Warn("warming the extensions' compilation cache", "dir", dir, "err", err)
		return
	}
	in.o.Log.Info("warmed the extensions' compilation cache", "dir", dir, "modules", len(paths))
}

// installModule copies one module through a temporary file beside dst,
// checks the copy and renames it over dst.
func (in *Installer) installModule(ctx context.Context, name, dst string) (plexusapi.NodeExtension, error) {
	var node plexusapi.NodeExtension
	src, err := openModule(in.o.ExtensionsSrcDir, name)
	if err != nil {
		return node, err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return node, err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), "."+extcopy.ModuleFile+".tmp-")
	if err != nil {
		return node, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing left
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(src, extensions.MaxModuleBytes+1))
	if err == nil && n > extensions.MaxModuleBytes {
		err = fmt.Errorf("more than the %d bytes plexus loads", extensions.MaxModuleBytes)
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return node, fmt.Errorf("copying %s: %w", name, err)
	}
	decl, _, err := extensions.Check(ctx, tmp)
	if err != nil {
		return node, fmt.Errorf("module %s: %w", name, err)
	}
	node.Name, node.Version, node.SHA256 = decl.Name, decl.Version, hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(tmp, dst); err != nil {
		return node, err
	}
	node.Loaded = true
	return node, nil
}

// openModule opens srcDir/name/module.wasm, refusing a symbolic link on
// the way or anything but a regular file: a module is a file of its image,
// never one elsewhere on the node.
func openModule(srcDir, name string) (*os.File, error) {
	root, err := os.OpenRoot(srcDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel := filepath.Join(name, extcopy.ModuleFile)
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

// pruneExtensions removes from ExtensionsDir the modules (and leftover
// temporary files) of every NAME not in keep, then NAME's directory if
// it is empty; anything else there stays.
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
			if f.Name() == extcopy.ModuleFile || strings.HasPrefix(f.Name(), "."+extcopy.ModuleFile+".tmp-") {
				if err := os.Remove(filepath.Join(dir, f.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		_ = os.Remove(dir) // only if empty
		in.o.Log.Info("removed an extension module the config no longer names", "path", filepath.Join(dir, extcopy.ModuleFile))
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

// extensionsConfig is the plugin's "extensions" key once
// InstallExtensions has run: nil to leave --config's as it is.
func (in *Installer) extensionsConfig() map[string]any {
	in.extState.mu.Lock()
	defer in.extState.mu.Unlock()
	return in.extState.config
}

// NodeExtensions is each module's state for the node's PlexusNode:
// Loaded when installed and named in the plugin's config, Error when
// refused.
func (in *Installer) NodeExtensions() []plexusapi.NodeExtension {
	in.extState.mu.Lock()
	defer in.extState.mu.Unlock()
	return slices.Clone(in.extState.nodes)
}
