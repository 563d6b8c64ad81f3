package extensions

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPrepareWarm is the per-call cost of one prepare with one module
// already instantiated: JSON in, hook, JSON out, guards.
// longLived=true is plexusd's host (the deadline check compiled in),
// false a thin plugin's (wazero's context check).
func BenchmarkPrepareWarm(b *testing.B) {
	for _, longLived := range []bool{false, true} {
		b.Run(fmt.Sprintf("longLived=%v", longLived), func(b *testing.B) {
			h := newHost(b, Config{Modules: []ModuleConfig{{Path: wasmPath(b, "vlan")}}, LongLived: longLived})
			ctx := context.Background()
			if err := h.LoadAll(ctx); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				req := prepareReq(bridgeConf, map[string]string{"com.example.vlan": "100"}, nil)
				if err := h.Prepare(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkColdThinFromCache is what one thin-mode CNI process pays for
// extensions: New (declarations only), then one Prepare that loads the
// module from a warm compilation cache, instantiates it and calls it.
func BenchmarkColdThinFromCache(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	path := wasmPath(b, "vlan")
	if _, err := Warm(ctx, dir, path); err != nil {
		b.Fatal(err)
	}
	cfg := Config{CacheDir: dir, Modules: []ModuleConfig{{Path: path}}}
	for b.Loop() {
		h, err := New(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Prepare(ctx, prepareReq(bridgeConf, map[string]string{"com.example.vlan": "100"}, nil)); err != nil {
			b.Fatal(err)
		}
		h.Close(ctx)
	}
}

// BenchmarkNewDeclarationsOnly is New alone: what a CNI call pays when the
// pod's selection carries no extension keys.
func BenchmarkNewDeclarationsOnly(b *testing.B) {
	ctx := context.Background()
	cfg := Config{Modules: []ModuleConfig{{Path: wasmPath(b, "vlan")}, {Path: wasmPath(b, "overrides")}, {Path: wasmPath(b, "enricher")}}}
	for b.Loop() {
		if _, err := New(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
