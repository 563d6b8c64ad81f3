package extensions

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/status"
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

// BenchmarkModuleMemory is what plexusd holds for loaded modules: the
// growth of the process's resident memory and of the Go heap in use from
// before the host is built to after LoadAll and one hook call (a Go guest
// grows its linear memory on its first call), with wazero's compiled code
// mapped outside the Go heap. Run one module per process for clean figures:
//
//	go test -run XXX -bench 'ModuleMemory/vlan$' -benchtime 1x ./extensions/
func BenchmarkModuleMemory(b *testing.B) {
	for _, names := range [][]string{{"vlan"}, {"enricher"}, {"overrides"}, {"vlan", "enricher"}} {
		b.Run(strings.Join(names, "+"), func(b *testing.B) {
			ctx := context.Background()
			var mods []ModuleConfig
			for _, n := range names {
				mods = append(mods, ModuleConfig{Path: wasmPath(b, n)})
			}
			rss0, heap0 := memoryNow(b)
			h := newHost(b, Config{Modules: mods, LongLived: true, Isolate: true})
			if err := h.LoadAll(ctx); err != nil {
				b.Fatal(err)
			}
			for _, st := range h.Modules() {
				if !st.Loaded {
					b.Fatalf("%s not loaded: %s", st.Name, st.Err)
				}
			}
			// The first calls, which each module owning a key or seeing
			// every attachment answers; the answers do not matter here.
			req := prepareReq(bridgeConf, map[string]string{"com.example.vlan": "100", "io.plexus.overrides": `{"mtu":1280}`}, nil)
			_ = h.Prepare(ctx, req)
			_ = h.Enrich(ctx, &pipeline.EnrichRequest{Attachment: req.Attachment, Entry: &status.Entry{Name: "ns/net"}})
			rss1, heap1 := memoryNow(b)
			for b.Loop() {
				_ = h.Modules()
			}
			// After the loop: b.Loop's first call resets reported metrics.
			b.ReportMetric(float64(rss1-rss0)/(1<<20), "RSS-MiB")
			b.ReportMetric(float64(heap1-heap0)/(1<<20), "heap-MiB")
		})
	}
}

// memoryNow is the process's resident set (VmRSS) and the Go heap in use,
// after a collection.
func memoryNow(b *testing.B) (rss, heap int64) {
	b.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	return rss, int64(ms.HeapInuse)
}
