package cniplugin

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/manifests"
)

// BenchmarkHandlerLifecycle is plexusd's own cost per pod lifecycle (ADD
// and DEL through its handler, one selection, the manifests source) with a
// delegate that attaches nothing: what thick mode adds beside the shim's
// start and the delegates' run. Most of it is file creation in cacheDir
// (libcni's result cache, the record, the lock, the DEL's tombstone):
//
//	go test -run '^$' -bench HandlerLifecycle -cpuprofile cpu.out ./cmd/internal/cniplugin/
func BenchmarkHandlerLifecycle(b *testing.B) {
	f := newStateFixture(b)
	i := 0
	for b.Loop() {
		id := "c" + strconv.Itoa(i)
		i++
		f.call(b, "ADD", id, false, nil)
		f.call(b, "DEL", id, false, nil)
	}
}

// BenchmarkHandlerCall is plexusd's own time in one call, ADD and DEL
// apart, with 0 and 1 selections: its handler as plexusd runs it, the
// source loaded once, and a delegate that attaches nothing. Beside
// BenchmarkShimCall (the shim's forwarding against a socket that answers
// at once), it is the least thick mode can add to a call beyond the
// shim's start and the delegates' own time. PLEXUS_BENCH_SETTLE (none by
// default; 50ms as BenchmarkDelRatio) pauses before each call, which then
// finds the caches as plexusd finds them between a node's calls.
//
//	go test -run '^$' -bench HandlerCall ./cmd/internal/cniplugin/
func BenchmarkHandlerCall(b *testing.B) {
	for _, c := range []struct {
		selections int
		args       string
	}{
		{0, "K8S_POD_NAMESPACE=demo;K8S_POD_NAME=plain;K8S_POD_UID=5678"},
		{1, ""}, // web
	} {
		b.Run(fmt.Sprintf("selections=%d", c.selections), func(b *testing.B) {
			f := newStateFixture(b)
			f.args = c.args
			src, err := manifests.Load(filepath.Join(f.dir, "manifests"))
			if err != nil {
				b.Fatal(err)
			}
			f.o.Source = func(*config.Config, Command, *slog.Logger) (source.Source, error) { return src, nil }
			pause := settle(b)
			var add, del time.Duration
			i := 0
			for b.Loop() {
				id := "c" + strconv.Itoa(i)
				i++
				time.Sleep(pause)
				start := time.Now()
				f.call(b, "ADD", id, false, nil)
				add += time.Since(start)
				time.Sleep(pause)
				start = time.Now()
				f.call(b, "DEL", id, false, nil)
				del += time.Since(start)
			}
			b.ReportMetric(float64(add.Microseconds())/float64(i)/1000, "ms-add")
			b.ReportMetric(float64(del.Microseconds())/float64(i)/1000, "ms-del")
		})
	}
}

// BenchmarkHandlerCrowdedNode is one pod's ADD and DEL, and the runtime's
// repeated DEL, on a node whose libcni cache holds 440 other attachments
// (110 pods of four networks), with the kernel's boot ID known and not.
// Unknown, every DEL lists libcni's cache for leftovers of the container;
// known, only a record or tombstone from before the boot makes it list.
//
//	go test -run '^$' -bench HandlerCrowdedNode ./cmd/internal/cniplugin/
func BenchmarkHandlerCrowdedNode(b *testing.B) {
	for _, boot := range []string{"known", "unknown"} {
		b.Run("boot="+boot, func(b *testing.B) {
			f := newStateFixture(b)
			if boot == "known" {
				f.o.Boot = BootID()
			}
			results := filepath.Join(f.cache, "results")
			if err := os.MkdirAll(results, 0o700); err != nil {
				b.Fatal(err)
			}
			for i := range 440 {
				name := fmt.Sprintf("net%d-%064d-net%d", i%4, i/4, i%4)
				if err := os.WriteFile(filepath.Join(results, name), []byte(`{"kind":"cniCacheV1"}`), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			var del time.Duration
			i := 0
			for b.Loop() {
				id := "c" + strconv.Itoa(i)
				i++
				f.call(b, "ADD", id, false, nil)
				start := time.Now()
				f.call(b, "DEL", id, false, nil)
				f.call(b, "DEL", id, true, nil)
				del += time.Since(start)
			}
			b.ReportMetric(float64(del.Microseconds())/float64(i)/1000, "ms-both-dels")
		})
	}
}

// settle is PLEXUS_BENCH_SETTLE, the pause before each timed call.
func settle(b *testing.B) time.Duration {
	d, err := time.ParseDuration(cmp.Or(os.Getenv("PLEXUS_BENCH_SETTLE"), "0s"))
	if err != nil || d < 0 {
		b.Fatalf("PLEXUS_BENCH_SETTLE=%q: want a duration such as 50ms or 0s", os.Getenv("PLEXUS_BENCH_SETTLE"))
	}
	return d
}
