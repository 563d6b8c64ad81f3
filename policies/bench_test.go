package policies

import (
	"context"
	"slices"
	"testing"
	"time"
)

// benchAnnotation exercises every library rule: static IPs (CIDR checks),
// MAC and interface requests from an allowed namespace, three selections.
const benchAnnotation = `[{"name":"blue","ips":["192.0.2.7/24"],"mac":"02:00:00:00:00:01","interface":"data0"},` +
	`{"name":"blue","namespace":"shared"},{"name":"red"}]`

func benchRequestEngine(b *testing.B) (*Engine, map[string]any) {
	b.Helper()
	e := libraryEngine(b)
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
	d, err := e.Authorize(context.Background(), req)
	if err != nil || !d.Allowed {
		b.Fatalf("benchmark request not allowed: %+v %v", d, err)
	}
	in, err := BuildInput(req)
	if err != nil {
		b.Fatal(err)
	}
	return e, in
}

// BenchmarkDecision is one prepared decision with the whole library
// enabled: go test ./policies -run '^$' -bench Decision -benchmem
func BenchmarkDecision(b *testing.B) {
	e, in := benchRequestEngine(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Decide(ctx, in); !d.Allowed {
			b.Fatalf("denied: %+v", d)
		}
	}
}

// BenchmarkDecisionP99 reports the 99th percentile of 10,000 single
// decisions per iteration as p99-µs (the goal is below 200µs; measured, not
// asserted).
func BenchmarkDecisionP99(b *testing.B) {
	e, in := benchRequestEngine(b)
	ctx := context.Background()
	const n = 10000
	lat := make([]time.Duration, n)
	for b.Loop() {
		for i := range lat {
			start := time.Now()
			e.Decide(ctx, in)
			lat[i] = time.Since(start)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[n*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(lat[n/2].Nanoseconds())/1e3, "p50-µs")
}
