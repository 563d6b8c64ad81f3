package bench

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkThinPolicyCost is the whole-process cost a policy adds to a
// thin ADD (1 selection): each iteration runs the lifecycle without a
// policy and with namespace isolation from the shipped library, in turn
// (policies run on ADD only). It reports the median of the paired
// differences, which a scheduling hiccup in one lifecycle of ~200 ms does
// not move as it moves a mean, and the mean for comparison. Use at least
// -benchtime 100x: the difference is a few ms against lifecycles that vary
// by about as much.
func BenchmarkThinPolicyCost(b *testing.B) {
	s := newSetup(b, 1)
	plain := plexusRunner(b, s, "plain")
	s.w.UseLibraryPolicy("isolation.yaml", "plexus:\n  config:\n    namespace_isolation: {enabled: true}\n")
	s.w.WritePlexus()
	withPolicy := plexusRunner(b, s, "policy")
	var diffs []time.Duration
	var sum time.Duration
	for b.Loop() {
		d := timed(withPolicy) - timed(plain)
		diffs = append(diffs, d)
		sum += d
	}
	slices.Sort(diffs)
	b.ReportMetric(float64(diffs[len(diffs)/2])/1e6, "median-policy-ms")
	b.ReportMetric(float64(sum)/float64(len(diffs))/1e6, "mean-policy-ms")
}
