package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkThickBuilds compares two plexusd builds, or one build under
// two environments, in the same run: two nodes side by side, each with
// its own plexusd, and the delegates run directly, every ADD and DEL
// after the same pause in an order drawn anew each iteration. The other
// node runs plexus's binaries (plexus*) from PLEXUS_BENCH_OTHER_BIN and
// the very files of bin/ for everything else, and its plexusd gets
// PLEXUS_BENCH_OTHER_ENV (comma-separated KEY=value, such as GOGC=400),
// which its delegates inherit too: libcni runs them with its environment.
// Reported: each median, and the median of the paired differences other
// minus this. Run with neither set, it measures the run's own noise.
//
//	PLEXUS_BENCH_OTHER_BIN=/tmp/bin-b go test -run '^$' -bench ThickBuilds -benchtime 300x ./tests/bench/
func BenchmarkThickBuilds(b *testing.B) {
	pause := settlePause(b)
	for _, n := range []int{0, 3} {
		b.Run(fmt.Sprintf("selections=%d", n), func(b *testing.B) {
			s := newSetup(b, n)
			floorAdd, floorDel := floorSteps(b, s)
			s.w.StartDaemon(deployedArgs()...)
			thisAdd, thisDel := plexusSteps(b, s, "thick")
			otherAdd, otherDel := otherThick(b, n)
			runs := []delRun{{add: floorAdd, del: floorDel}, {add: thisAdd, del: thisDel}, {add: otherAdd, del: otherDel}}
			interleave(b, runs, pause, 9)
			floor, this, other := runs[0], runs[1], runs[2]
			b.ReportMetric(ms(medianOf(floor.addT)), "ms-add-delegates")
			b.ReportMetric(ms(medianOf(this.addT)), "ms-add-this")
			b.ReportMetric(ms(medianOf(other.addT)), "ms-add-other")
			b.ReportMetric(ms(medianOf(diff(other.addT, this.addT))), "ms-add-other-minus-this")
			b.ReportMetric(ms(medianOf(floor.t)), "ms-del-delegates")
			b.ReportMetric(ms(medianOf(this.t)), "ms-del-this")
			b.ReportMetric(ms(medianOf(other.t)), "ms-del-other")
			b.ReportMetric(ms(medianOf(diff(other.t, this.t))), "ms-del-other-minus-this")
			b.ReportMetric(medianRatio(this.t, floor.t), "this/delegates")
			b.ReportMetric(medianRatio(other.t, floor.t), "other/delegates")
		})
	}
}

// otherThick sets up the second node with n selections and its plexusd
// from PLEXUS_BENCH_OTHER_BIN and PLEXUS_BENCH_OTHER_ENV, and returns its
// thick ADD and DEL.
func otherThick(b *testing.B, n int) (add, del func()) {
	if dir := os.Getenv("PLEXUS_BENCH_OTHER_BIN"); dir != "" {
		// The harness finds every binary in BinDir while a node is set up.
		orig := harness.BinDir
		harness.BinDir = overlayBin(b, dir, orig)
		defer func() { harness.BinDir = orig }()
	}
	s := newSetup(b, n)
	restore := setEnv(os.Getenv("PLEXUS_BENCH_OTHER_ENV"))
	s.w.StartDaemon(deployedArgs()...) // plexusd inherits this environment
	restore()
	return plexusSteps(b, s, "thick")
}

// overlayBin is a directory of links to base's files, but for plexus's
// binaries found in dir. Both nodes then start the same delegate files:
// two copies of one binary can start at different speeds, as the page
// cache holds each, which a comparison of plexus builds must not measure.
func overlayBin(b *testing.B, dir, base string) string {
	out := b.TempDir()
	entries, err := os.ReadDir(base)
	harness.Must(b, err)
	for _, e := range entries {
		src := filepath.Join(base, e.Name())
		if other := filepath.Join(dir, e.Name()); strings.HasPrefix(e.Name(), "plexus") && fileExists(other) {
			src = other
		}
		harness.Must(b, os.Symlink(src, filepath.Join(out, e.Name())))
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// setEnv sets each KEY=value of the comma-separated list in this process
// and returns what puts the earlier values back.
func setEnv(list string) (restore func()) {
	var undo []func()
	for _, kv := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if old, had := os.LookupEnv(k); had {
			undo = append(undo, func() { os.Setenv(k, old) })
		} else {
			undo = append(undo, func() { os.Unsetenv(k) })
		}
		os.Setenv(k, v)
	}
	return func() {
		for _, f := range undo {
			f()
		}
	}
}
