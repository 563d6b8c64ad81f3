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

func TestPruneDisabledRulesKeepsEnabledAndShared(t *testing.T) {
	data := filepath.Join(t.TempDir(), "admin.yaml")
	if err := os.WriteFile(data, []byte("plexus:\n  config:\n    namespace_isolation: {enabled: true}\n    max_attachments: {enabled: false, max: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := LoadPaths([]string{"library", data}, loadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pruneDisabledRules(l)
	var pkgs []string
	for _, m := range l.Modules {
		pkgs = append(pkgs, m.Package.Path.String())
	}
	has := func(p string) bool {
		for _, x := range pkgs {
			if x == p {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"data.plexus.authz", "data.plexus.lib", "data.plexus.rules.namespace_isolation"} {
		if !has(want) {
			t.Errorf("pruned %s; left %v", want, pkgs)
		}
	}
	for _, gone := range []string{"data.plexus.rules.max_attachments", "data.plexus.rules.nad_allowlist"} {
		if has(gone) {
			t.Errorf("kept disabled %s", gone)
		}
	}
}
