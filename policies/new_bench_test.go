package policies

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkNewOneRule is what a thin plugin pays per ADD for a typical policy:
// the library with one rule enabled (the others are pruned before compiling).
func BenchmarkNewOneRule(b *testing.B) {
	data := filepath.Join(b.TempDir(), "admin.yaml")
	os.WriteFile(data, []byte("plexus:\n  config:\n    namespace_isolation: {enabled: true}\n"), 0o644)
	for b.Loop() {
		if _, err := New(context.Background(), Config{Paths: []string{"library", data}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewAllRules compiles the library with every rule enabled.
func BenchmarkNewAllRules(b *testing.B) {
	for b.Loop() {
		if _, err := New(context.Background(), Config{Paths: []string{"library", "testdata/config-all.yaml"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkThinDecision is what a thin plugin pays for one decision with
// every rule enabled: the compile and the decision on the compiled query.
func BenchmarkThinDecision(b *testing.B) {
	req := benchRequest(b)
	ctx := context.Background()
	for b.Loop() {
		e, err := New(ctx, Config{Paths: []string{"library", "testdata/config-all.yaml"}})
		if err != nil {
			b.Fatal(err)
		}
		if d, _ := e.Authorize(ctx, req); !d.Allowed {
			b.Fatalf("denied: %+v", d)
		}
	}
}
