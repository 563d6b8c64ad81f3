package policies

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/pipeline"
)

// benchAnnotation exercises every library rule: static IPs (CIDR checks),
// MAC and interface requests from an allowed namespace, three selections.
const benchAnnotation = `[{"name":"blue","ips":["192.0.2.7/24"],"mac":"02:00:00:00:00:01","interface":"data0"},` +
	`{"name":"blue","namespace":"shared"},{"name":"red"}]`

func benchRequestEngine(b *testing.B) (*Engine, *pipeline.AuthorizeRequest) {
	b.Helper()
	e := libraryEngine(b)
	req := benchRequest(b)
	d, err := e.Authorize(context.Background(), req)
	if err != nil || !d.Allowed {
		b.Fatalf("benchmark request not allowed: %+v %v", d, err)
	}
	return e, req
}

// benchRequest is benchAnnotation's first element, which the library with
// every rule enabled allows.
func benchRequest(b *testing.B) *pipeline.AuthorizeRequest {
	b.Helper()
	req := newRequest(b, benchAnnotation)
	req.Pod.Namespace = "telco"
	req.Attachment.NAD.Annotations = map[string]string{
		"plexus.io/allowed-namespaces":   "team-a,telco",
		"plexus.io/allowed-pod-selector": "app=web,tier in (gold,silver),!debug",
	}
	for _, s := range req.Selections {
		if s.Namespace == "team-a" {
			s.Namespace = "telco"
		}
	}
	req.Attachment.NAD.Namespace = "telco"
	return req
}

// BenchmarkDecision is one decision on a prepared query, as plexusd makes
// it, with the whole library enabled, building the input included:
// go test ./policies -run '^$' -bench Decision -benchmem
func BenchmarkDecision(b *testing.B) {
	e, in := benchRequestEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, _ := e.Authorize(ctx, in); !d.Allowed {
			b.Fatalf("denied: %+v", d)
		}
	}
}

// BenchmarkDecisionP99 reports the 50th and 99th percentiles of 10,000
// back-to-back decisions (the goal is p99 below 200µs; measured, not
// asserted), for three policies over the same request:
//   - constant: a decision that reads nothing, the floor this process and
//     machine impose (OPA's setup per evaluation, the garbage collector);
//   - isolation: namespace isolation from the library, a typical policy;
//   - library: every library rule enabled, each taking its costly path.
func BenchmarkDecisionP99(b *testing.B) {
	_, req := benchRequestEngine(b)
	data := filepath.Join(b.TempDir(), "isolation.yaml")
	if err := os.WriteFile(data, []byte("plexus:\n  config:\n    namespace_isolation: {enabled: true, global_namespaces: [shared]}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	constant := writeFiles(b, map[string]string{"p.rego": decisionPolicy(`{"allowed": true, "reasons": []}`)})
	engines := []struct {
		name string
		e    *Engine
	}{
		{"constant", newEngine(b, Config{Paths: []string{constant}})},
		{"isolation", newEngine(b, Config{Paths: []string{libraryDir, data}})},
		{"library", libraryEngine(b)},
	}
	for _, tc := range engines {
		b.Run(tc.name, func(b *testing.B) {
			p50, p99 := percentiles(b, tc.e, req)
			b.ReportMetric(p99, "p99-µs")
			b.ReportMetric(p50, "p50-µs")
		})
	}
}

func percentiles(b *testing.B, e *Engine, req *pipeline.AuthorizeRequest) (p50, p99 float64) {
	ctx := context.Background()
	const n = 10000
	lat := make([]time.Duration, n)
	for b.Loop() {
		for i := range lat {
			start := time.Now()
			if d, _ := e.Authorize(ctx, req); !d.Allowed {
				b.Fatalf("denied: %+v", d)
			}
			lat[i] = time.Since(start)
		}
	}
	slices.Sort(lat)
	return float64(lat[n/2].Nanoseconds()) / 1e3, float64(lat[n*99/100].Nanoseconds()) / 1e3
}
