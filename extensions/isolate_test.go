package extensions

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// A host built with Isolate (plexusd) refuses a module that fails a check,
// reports it in Modules and Refused, and keeps the others working: here
// the vlan example, configured first, still sets a bridge's VLAN.
func TestIsolateRefusesOneModuleAndKeepsTheRest(t *testing.T) {
	fake := func(manifest string) fakeWasm {
		return fakeWasm{manifest: manifest, exports: []string{"prepare"}, body: bodyReturn0}
	}
	write := func(t *testing.T, bin []byte) string {
		p := filepath.Join(t.TempDir(), "bad.wasm")
		if err := os.WriteFile(p, bin, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		// module builds the second module's config.
		module func(t *testing.T) ModuleConfig
		want   []string // in its ModuleState.Err
	}{
		{"missing file", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: filepath.Join(t.TempDir(), "none.wasm")}
		}, []string{"none.wasm", "no such file"}},
		{"not wasm", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: write(t, []byte("#!/bin/sh\n"))}
		}, []string{"not a wasm binary"}},
		{"no manifest", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: fake("").write(t, "m.wasm")}
		}, []string{`no "plexus.manifest" custom section`}},
		{"ABI version", func(t *testing.T) ModuleConfig {
			m := `{"abi":2,"name":"next","prefixes":["com.next."],"hooks":["prepare"]}`
			return ModuleConfig{Path: fake(m).write(t, "m.wasm")}
		}, []string{"ABI version 2 is not supported (this host speaks 1)"}},
		{"bad prefix", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: fake(manifestJSON("flat", "vlan", `"prepare"`)).write(t, "m.wasm")}
		}, []string{`prefix "vlan" is not reverse domain notation`}},
		{"over the limits", func(t *testing.T) ModuleConfig {
			valid := fake(manifestJSON("hostile", "com.hostile.", `"prepare"`))
			return ModuleConfig{Path: write(t, withSection(t, valid.bytes(), wasmfmt.SectionFunction, huge))}
		}, []string{`extension "hostile"`, "4294967295 functions claimed"}},
		{"keys clash", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: fake(manifestJSON("vlan-sub", "com.example.sub.", `"prepare"`)).write(t, "m.wasm")}
		}, []string{`module "vlan" prefix "com.example." overlaps module "vlan-sub" prefix "com.example.sub."`, `module "vlan-sub"`, "refused"}},
		{"same name", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: fake(manifestJSON("vlan", "com.other.", `"prepare"`)).write(t, "m.wasm")}
		}, []string{`two modules are named "vlan"`}},
		{"bad config", func(t *testing.T) ModuleConfig {
			return ModuleConfig{Path: fake(manifestJSON("cfg", "com.cfg.", `"prepare"`)).write(t, "m.wasm"), MemoryLimit: "3Mx"}
		}, []string{"module 1", `memoryLimit: "3Mx" is not a byte count`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			bad := c.module(t)
			h := newHost(t, Config{Modules: []ModuleConfig{{Path: wasmPath(t, "vlan")}, bad}, LongLived: true, Isolate: true})
			if err := h.LoadAll(ctx); err != nil {
				t.Fatalf("LoadAll: %v", err)
			}
			st := h.Modules()
			if len(st) != 2 {
				t.Fatalf("Modules() = %+v", st)
			}
			if !st[0].Loaded || st[0].Err != "" || st[0].Name != "vlan" || len(st[0].SHA256) != 64 {
				t.Errorf("vlan: %+v, want loaded", st[0])
			}
			if st[1].Loaded || st[1].Path != bad.Path {
				t.Errorf("bad module: %+v, want not loaded", st[1])
			}
			for _, w := range c.want {
				if !strings.Contains(st[1].Err, w) {
					t.Errorf("bad module's error %q lacks %q", st[1].Err, w)
				}
			}
			if r := h.Refused(); len(r) != 1 || r[0].Error() != st[1].Err {
				t.Errorf("Refused() = %v", r)
			}
			req := prepareReq(bridgeConf, map[string]string{"com.example.vlan": "7"}, nil)
			if err := h.Prepare(ctx, req); err != nil || !strings.Contains(string(req.Attachment.Config), `"vlan":7`) {
				t.Fatalf("vlan beside a refused module: err %v, config %s", err, req.Attachment.Config)
			}
		})
	}
}

// Without Isolate (the plugin, plexusctl) the same failures fail the host.
func TestStrictHostFailsOnABadModule(t *testing.T) {
	sub := fakeWasm{manifest: manifestJSON("vlan-sub", "com.example.sub.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}.write(t, "sub.wasm")
	_, err := New(context.Background(), Config{Modules: []ModuleConfig{{Path: wasmPath(t, "vlan")}, {Path: sub}}})
	if err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Fatalf("err = %v, want the clash", err)
	}
}

// A refused module whose declaration was read keeps its keys: an
// attachment selecting them gets the module's failure policy (prepare:
// fail by default), not the unowned-keys policy; the keys it shares with
// a module that runs go to that module.
func TestRefusedModuleKeysFollowItsFailurePolicy(t *testing.T) {
	valid := fakeWasm{manifest: manifestJSON("hostile", "com.hostile.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}
	p := filepath.Join(t.TempDir(), "hostile.wasm")
	if err := os.WriteFile(p, withSection(t, valid.bytes(), wasmfmt.SectionFunction, huge), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		policy   string
		wantErr  string
		wantWarn string
	}{
		{"", `extension "hostile", hook prepare: module refused at load`, ""},
		{PolicyIgnore, "", "module refused at load"},
	}
	for _, c := range cases {
		t.Run("prepareFailure="+c.policy, func(t *testing.T) {
			ctx := context.Background()
			h := newHost(t, Config{Modules: []ModuleConfig{{Path: p, PrepareFailure: c.policy}}, LongLived: true, Isolate: true})
			if err := h.LoadAll(ctx); err != nil {
				t.Fatal(err)
			}
			var w warnings
			err := h.Prepare(ctx, prepareReq(bridgeConf, map[string]string{"com.hostile.x": "1"}, w.add))
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
			if c.wantWarn != "" && (len(w) != 1 || !strings.Contains(w[0], c.wantWarn)) {
				t.Fatalf("warnings = %q, want %q", w, c.wantWarn)
			}
		})
	}
}
