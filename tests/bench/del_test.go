package bench

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkDelRatio times DEL alone: plexus thin and thick against the
// delegates' own DELs run directly by the runtime (libcni in this process,
// in reverse order, as plexus runs them), with 0, 3 and 8 selections. Each
// iteration attaches, then detaches, for the three in an order drawn anew;
// a fourth timing is the shim's start alone (VERSION), the floor any
// exec'd plugin pays. Reported for DEL: each median (ms), the median of
// the paired ratios to the delegates' own DEL, and the median of the
// paired differences from it (ms); for ADD the medians, which give the
// delegates' own share of an ADD.
//
//	go test -run '^$' -bench DelRatio -benchtime 100x ./tests/bench/
func BenchmarkDelRatio(b *testing.B) {
	for _, n := range []int{0, 3, 8} {
		b.Run(fmt.Sprintf("selections=%d", n), func(b *testing.B) {
			s := newSetup(b, n)
			floorAdd, floorDel := floorSteps(b, s)
			thinAdd, thinDel := plexusSteps(b, s, "thin")
			s.w.StartDaemon(deployedLogLevel...)
			thickAdd, thickDel := plexusSteps(b, s, "thick")
			shim := shimStart(b)
			runs := []struct {
				add, del func()
				t, addT  []time.Duration
			}{{add: floorAdd, del: floorDel}, {add: thinAdd, del: thinDel}, {add: thickAdd, del: thickDel}, {add: func() {}, del: shim}}
			for i := range runs {
				runs[i].add() // warm up: page cache, plexusd's first call
				runs[i].del()
			}
			order := rand.New(rand.NewPCG(5, 5))
			for b.Loop() {
				for _, i := range order.Perm(len(runs)) {
					runs[i].addT = append(runs[i].addT, timed(runs[i].add))
					runs[i].t = append(runs[i].t, timed(runs[i].del))
				}
			}
			floor, thin, thick := runs[0].t, runs[1].t, runs[2].t
			b.ReportMetric(ms(medianOf(floor)), "ms-del-delegates")
			b.ReportMetric(ms(medianOf(thin)), "ms-del-thin")
			b.ReportMetric(ms(medianOf(thick)), "ms-del-thick")
			b.ReportMetric(ms(medianOf(runs[3].t)), "ms-shim-exec")
			b.ReportMetric(medianRatio(thin, floor), "thin/delegates")
			b.ReportMetric(medianRatio(thick, floor), "thick/delegates")
			b.ReportMetric(ms(medianOf(diff(thin, floor))), "ms-thin-over-delegates")
			b.ReportMetric(ms(medianOf(diff(thick, floor))), "ms-thick-over-delegates")
			// The ADDs, for the delegates' own share of an ADD's time.
			b.ReportMetric(ms(medianOf(runs[0].addT)), "ms-add-delegates")
			b.ReportMetric(ms(medianOf(runs[1].addT)), "ms-add-thin")
			b.ReportMetric(ms(medianOf(runs[2].addT)), "ms-add-thick")
		})
	}
}

// shimStart is one exec of plexus-shim answering VERSION.
func shimStart(b *testing.B) func() {
	bin := filepath.Join(harness.BinDir, "plexus-shim")
	return func() {
		cmd := exec.Command(bin)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte(`"supportedVersions"`)) {
			b.Fatalf("%s VERSION: %v: %s", bin, err, out)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// diff is each iteration's a minus its b.
func diff(a, b []time.Duration) []time.Duration {
	d := make([]time.Duration, len(a))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	return d
}
