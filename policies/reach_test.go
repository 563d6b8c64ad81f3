package policies

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func loadedPackages(t *testing.T, l *Loaded) []string {
	t.Helper()
	var pkgs []string
	for _, m := range l.Modules {
		pkgs = append(pkgs, strings.TrimPrefix(m.Package.Path.String(), "data."))
	}
	slices.Sort(pkgs)
	return pkgs
}

// The engine parses and compiles only what the decision can reach.
func TestLoadForQueryParsesOnlyReachedModules(t *testing.T) {
	tests := []struct {
		name  string
		admin string
		want  []string
	}{
		{
			name:  "one rule enabled leaves out the others and the selector",
			admin: "plexus:\n  config:\n    namespace_isolation: {enabled: true}\n    max_attachments: {enabled: false, max: 1}\n",
			want:  []string{"plexus.authz", "plexus.lib", "plexus.rules.namespace_isolation"},
		},
		{
			name:  "the NAD allow list brings in the selector it imports",
			admin: "plexus:\n  config:\n    nad_allowlist: {enabled: true}\n",
			want:  []string{"plexus.authz", "plexus.lib", "plexus.lib.selector", "plexus.rules.nad_allowlist"},
		},
		{
			name:  "no rule enabled needs only the decision",
			admin: "plexus:\n  config: {}\n",
			want:  []string{"plexus.authz", "plexus.lib"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "admin.yaml")
			if err := os.WriteFile(data, []byte(tc.admin), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := loadForQuery([]string{"library", data}, ast.MustParseBody(DefaultQuery))
			if err != nil {
				t.Fatal(err)
			}
			if got := loadedPackages(t, l); !slices.Equal(got, tc.want) {
				t.Errorf("loaded %v, want %v", got, tc.want)
			}
		})
	}
}

// Whatever way a module is referred to, it is reached; what nothing refers
// to is not parsed at all, so even a syntax error there goes unnoticed (the
// check command parses everything).
func TestLoadForQueryFollowsEveryKindOfReference(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.rego": `package main

import data.lib.aliased as al
import data.lib.whole

decision := {"allowed": true, "reasons": [al.x, whole, data.lib.direct.y, data.lib.dyn[name].z]} if name := "n"
`,
		"aliased.rego":   "package lib.aliased\n\nx := 1\n",
		"whole.rego":     "# a comment first\n\npackage lib.whole\n\nx := 1\n",
		"whole_sub.rego": "package lib.whole.sub\n\nx := 1\n",
		"direct.rego":    "package lib.direct\n\ny := 1\n",
		"dyn.rego":       "package lib.dyn.n\n\nz := 1\n",
		"odd.rego":       "package lib[\"odd\"]\n\nx := 1\n",
		"broken.rego":    "package unused\n\nthis is not rego\n",
	})
	l, err := loadForQuery([]string{dir}, ast.MustParseBody("data.main.decision"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lib.aliased", "lib.direct", "lib.dyn.n", "lib.odd", "lib.whole", "lib.whole.sub", "main"}
	if got := loadedPackages(t, l); !slices.Equal(got, want) {
		t.Errorf("loaded %v, want %v (an unreadable package clause is parsed anyway)", got, want)
	}
}

// A broken module the decision reaches still fails the load, naming the file.
func TestLoadForQueryReportsReachedSyntaxErrors(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.rego": "package main\n\ndecision := data.lib.x\n",
		"lib.rego":  "package lib\n\nx := \n",
	})
	_, err := loadForQuery([]string{dir}, ast.MustParseBody("data.main.decision"))
	if err == nil || !strings.Contains(err.Error(), "lib.rego") {
		t.Fatalf("error %v, want one naming lib.rego", err)
	}
}
