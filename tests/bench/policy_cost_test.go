package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkThinPolicyCost is the whole-process cost a policy adds to a
// thin ADD (4 selections): each iteration runs the lifecycle without a
// policy and with namespace isolation from the shipped library, in turn,
// and reports the difference of the means (policies run on ADD only).
func BenchmarkThinPolicyCost(b *testing.B) {
	s := newSetup(b, 4)
	plain := plexusRunner(b, s, "plain")
	lib, err := filepath.Abs("../../policies/library")
	harness.Must(b, err)
	data := filepath.Join(s.w.Dir, "isolation.yaml")
	s.w.WriteFile(data, "plexus:\n  config:\n    namespace_isolation: {enabled: true}\n")
	s.w.Set("policy", map[string]any{"paths": []string{lib, data}})
	withPolicy := plexusRunner(b, s, "policy")
	var tp, tw time.Duration
	for b.Loop() {
		tp += timed(plain)
		tw += timed(withPolicy)
	}
	b.ReportMetric(float64(tw-tp)/float64(b.N)/1e6, "policy-ms")
}
