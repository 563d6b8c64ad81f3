package install

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// vlanModule builds the vlan example as mk/ext.mk does, once per test
// binary: a module that passes extensions.Check.
var vlanModule = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "plexus-install-wasm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "vlan.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./vlan")
	cmd.Dir = "../../../extensions/examples"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build vlan: %v\n%s", err, b)
	}
	manifest, err := os.ReadFile("../../../extensions/examples/vlan/manifest.json")
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return wasmfmt.AppendCustomSection(wasm, abi.ManifestSection, manifest), nil
})

// withExtensions gives the node an extensions source dir and options
// copying the modules --config (extra, JSON) names to plexus.d/extensions.
func (n *node) withExtensions(extra string) Options {
	n.t.Helper()
	o := n.options()
	o.ExtensionsSrcDir = filepath.Join(filepath.Dir(n.src), "extensions")
	o.ExtensionsDir = filepath.Join(n.conf, "plexus.d", "extensions")
	must(n.t, os.MkdirAll(o.ExtensionsSrcDir, 0o755))
	extra = strings.ReplaceAll(extra, "SRC", o.ExtensionsSrcDir)
	must(n.t, json.Unmarshal([]byte(extra), &o.Extra))
	// The plugin's cache, which the installer warms: the node's, not the host's.
	o.Extra["cacheDir"] = filepath.Join(filepath.Dir(n.src), "cache")
	return o
}

// srcModule puts data at the source's name/module.wasm.
func srcModule(t *testing.T, o Options, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(o.ExtensionsSrcDir, name, "module.wasm")
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, data, 0o644))
	return p
}

// modulesConfig is a --config naming each module with a config of its
// own; extra adds keys to the entry of the module it names.
func modulesConfig(names []string, extra map[string]string) string {
	var mods []string
	for _, n := range names {
		mods = append(mods, fmt.Sprintf(`{"path":"SRC/%s/module.wasm","config":{"for":%q}%s}`, n, n, extra[n]))
	}
	return `{"logLevel":"debug","extensions":{"unownedKeys":"fail","modules":[` + strings.Join(mods, ",") + `]}}`
}

// TestExtensionsCheckedCopiedAndNamed: each module is checked before it
// is installed, as the plugin would load it; one that fails (not a
// module, keys another module owns, over its own limits, a bad entry, a
// link, too large, absent) is refused and reported, and left out of the config, while the good
// one is copied to the host and named there with its config; a module
// the host held that the config no longer names is removed.
func TestExtensionsCheckedCopiedAndNamed(t *testing.T) {
	good, err := vlanModule()
	must(t, err)
	cases := []struct {
		name    string
		setup   func(t *testing.T, o Options)
		wantErr string // "" installs it
		extra   string // keys added to its entry
	}{
		{"good", func(t *testing.T, o Options) { srcModule(t, o, "good", good) }, "", ""},
		{"notwasm", func(t *testing.T, o Options) { srcModule(t, o, "notwasm", []byte("#!/bin/sh\necho hi\n")) }, "image/extensions/notwasm/module.wasm: not a wasm binary", ""},
		// vlan again: its keys are good's, which comes first.
		{"clash", func(t *testing.T, o Options) { srcModule(t, o, "clash", good) }, `two modules are named "vlan"`, ""},
		{"overlimit", func(t *testing.T, o Options) { srcModule(t, o, "overlimit", good) }, "over limit of 1 pages", `,"memoryLimitPages":1`},
		{"badkey", func(t *testing.T, o Options) { srcModule(t, o, "badkey", good) }, "timeout", `,"timeout":"forever"`},
		{"filelink", func(t *testing.T, o Options) {
			outside := filepath.Join(t.TempDir(), "m.wasm")
			must(t, os.WriteFile(outside, good, 0o644))
			must(t, os.MkdirAll(filepath.Join(o.ExtensionsSrcDir, "filelink"), 0o755))
			must(t, os.Symlink(outside, filepath.Join(o.ExtensionsSrcDir, "filelink", "module.wasm")))
		}, "want a regular file", ""},
		{"dirlink", func(t *testing.T, o Options) {
			outside := t.TempDir()
			must(t, os.WriteFile(filepath.Join(outside, "module.wasm"), good, 0o644))
			must(t, os.Symlink(outside, filepath.Join(o.ExtensionsSrcDir, "dirlink")))
		}, "want a regular directory", ""},
		{"oversize", func(t *testing.T, o Options) {
			p := srcModule(t, o, "oversize", good)
			must(t, os.Truncate(p, extensions.MaxModuleBytes+1)) // sparse
		}, "more than the", ""},
		{"absent", func(*testing.T, Options) {}, "no such file", ""},
	}
	var names []string
	extra := map[string]string{}
	for _, c := range cases {
		names = append(names, c.name)
		extra[c.name] = c.extra
	}
	n := newNode(t)
	o := n.withExtensions(modulesConfig(names, extra))
	o.Uninstall = true
	for _, c := range cases {
		c.setup(t, o)
	}
	stale := filepath.Join(o.ExtensionsDir, "gone", "module.wasm")
	must(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	n.write(stale, "an older image's module")
	in, err := New(o)
	must(t, err)
	must(t, in.InstallExtensions(t.Context()))
	n.writeDefault("10-bridge.conflist")
	must(t, in.Reconcile(t.Context()))

	states := in.NodeExtensions()
	if len(states) != len(cases) {
		t.Fatalf("states %+v, want one per module", states)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, host := states[i], filepath.Join(o.ExtensionsDir, c.name, "module.wasm")
			if st.Path != host {
				t.Errorf("state path %q, want %q", st.Path, host)
			}
			if c.wantErr == "" {
				got, err := os.ReadFile(host)
				must(t, err)
				if !st.Loaded || st.Err != "" || st.Name != "vlan" || string(got) != string(good) {
					t.Errorf("state %+v, installed %d bytes; want the module installed", st, len(got))
				}
				return
			}
			if st.Loaded || !strings.Contains(st.Err, c.wantErr) {
				t.Errorf("state %+v, want refused with %q", st, c.wantErr)
			}
			if exists(host) {
				t.Errorf("%s installed", host)
			}
		})
	}
	if exists(filepath.Dir(stale)) {
		t.Errorf("%s: a module the config no longer names is left", stale)
	}
	list, _ := n.pluginConfig()
	ext := list["plugins"].([]any)[0].(map[string]any)["extensions"]
	want := map[string]any{"unownedKeys": "fail", "modules": []any{map[string]any{
		"path": filepath.Join(o.ExtensionsDir, "good", "module.wasm"), "config": map[string]any{"for": "good"}}}}
	if fmt.Sprint(ext) != fmt.Sprint(want) {
		t.Errorf("extensions %v, want %v", ext, want)
	}
	must(t, in.Uninstall())
	if exists(o.ExtensionsDir) {
		t.Errorf("%s left after uninstall", o.ExtensionsDir)
	}
}

// TestExtensionRemovedWithItsImage: an installed module is compiled into
// the extensions' cache, or the plugin's default one; a module the next installer's config no longer
// names leaves the host and the config.
func TestExtensionRemovedWithItsImage(t *testing.T) {
	good, err := vlanModule()
	must(t, err)
	n := newNode(t)
	n.writeDefault("10-bridge.conflist")
	o := n.withExtensions(modulesConfig([]string{"vlan"}, nil))
	o.Extra["extensions"].(map[string]any)["cacheDir"] = filepath.Join(n.conf, "cache")
	srcModule(t, o, "vlan", good)
	in, err := New(o)
	must(t, err)
	must(t, in.InstallExtensions(t.Context()))
	// Without "cacheDir" in "extensions": the plugin's default.
	delete(o.Extra["extensions"].(map[string]any), "cacheDir")
	in, err = New(o)
	must(t, err)
	must(t, in.InstallExtensions(t.Context()))
	host := filepath.Join(o.ExtensionsDir, "vlan", "module.wasm")
	if !exists(host) {
		t.Fatalf("%s not installed", host)
	}
	for _, dir := range []string{filepath.Join(n.conf, "cache"), filepath.Join(o.Extra["cacheDir"].(string), "extensions")} {
		if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
			t.Errorf("compilation cache %s: %v entries (%v), want it warmed", dir, len(ents), err)
		}
	}
	o = n.withExtensions(modulesConfig(nil, nil))
	in, err = New(o)
	must(t, err)
	must(t, in.InstallExtensions(t.Context()))
	must(t, in.Reconcile(t.Context()))
	if exists(host) {
		t.Errorf("%s left after its module left the config", host)
	}
	list, _ := n.pluginConfig()
	ext := list["plugins"].([]any)[0].(map[string]any)["extensions"].(map[string]any)
	if mods := ext["modules"].([]any); len(mods) != 0 {
		t.Errorf("modules %v, want none", mods)
	}
}

// TestExtensionsConfigRefused: a module path that is not
// --extensions-src-dir/NAME/module.wasm with NAME a plain name, or a dir
// among others' files, fails New, naming what was wrong.
func TestExtensionsConfigRefused(t *testing.T) {
	many := make([]string, maxExtensionModules+1)
	for i := range many {
		many[i] = fmt.Sprintf("m%d", i)
	}
	for _, tc := range []struct {
		name, extra string
		dir         func(o Options) string
		want        string
	}{
		{"name walking out", `{"extensions":{"modules":[{"path":"SRC/../module.wasm"}]}}`, nil, "want "},
		{"upper-case name", `{"extensions":{"modules":[{"path":"SRC/VLAN/module.wasm"}]}}`, nil, `"SRC/VLAN/module.wasm"`},
		{"host path", `{"extensions":{"modules":[{"path":"/etc/cni/net.d/plexus.d/extensions/vlan/module.wasm"}]}}`, nil, "want "},
		{"another file", `{"extensions":{"modules":[{"path":"SRC/vlan/manifest.json"}]}}`, nil, "want "},
		{"twice", modulesConfig([]string{"vlan", "vlan"}, nil), nil, "named twice"},
		{"too many", modulesConfig(many, nil), nil, "at most"},
		{"modules not a list", `{"extensions":{"modules":{"path":"x"}}}`, nil, "want a list"},
		{"dir holds the conf dir", modulesConfig(nil, nil), func(o Options) string { return filepath.Dir(o.ConfDir) }, "conf dir"},
		{"dir in the source", modulesConfig(nil, nil), func(o Options) string { return filepath.Join(o.ExtensionsSrcDir, "x") }, "source dir"},
		{"relative dir", modulesConfig(nil, nil), func(Options) string { return "extensions" }, "absolute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			o := n.withExtensions(tc.extra)
			if tc.dir != nil {
				o.ExtensionsDir = tc.dir(o)
			}
			tc.want = strings.ReplaceAll(tc.want, "SRC", o.ExtensionsSrcDir)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
