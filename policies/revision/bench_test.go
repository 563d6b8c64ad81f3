package revision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/plexus-cni/plexus/policies"
)

// BenchmarkActivateRevision verifies and activates revisions of the
// baseline with one switch changed, as plexusd does for each new
// generation: ns/op is the time a node takes to verify and swap one in;
// heap-B/revision is what one revision's engine keeps live (each is held
// here, as plexusd holds the one in force).
func BenchmarkActivateRevision(b *testing.B) {
	baseline, err := os.ReadFile(filepath.Join("..", "..", "policies", "baseline.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	s := newSyncer(b, b.TempDir(), 0)
	if _, err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	engines := make([]*policies.Engine, 0, b.N)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		data := map[string]string{"baseline.yaml": string(baseline) + fmt.Sprintf("# revision %d\n", i)}
		res, err := s.Apply(context.Background(), object(int64(i+1), "", nil, data))
		if err != nil {
			b.Fatal(err)
		}
		engines = append(engines, res.Engine)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heap-B/revision")
	runtime.KeepAlive(engines)
}
