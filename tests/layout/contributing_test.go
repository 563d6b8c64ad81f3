package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// productRoots are the directories whose packages ship in plexus's
// binaries; CONTRIBUTING.md's layout table must name each of them.
var productRoots = []string{"cmd/", "core/", "policies", "extensions"}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// layoutPaths are the paths named in the first column of CONTRIBUTING.md's
// "Layout" table.
func layoutPaths(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal(`CONTRIBUTING.md has no "## Layout" section`)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	var paths []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			paths = append(paths, m[1])
		}
	}
	return paths
}

// covers: a row "dir/" covers every package below dir; any other row
// covers the package of exactly that path.
func covers(row, pkg string) bool {
	if dir, ok := strings.CutSuffix(row, "/"); ok {
		return pkg == dir || strings.HasPrefix(pkg, row)
	}
	return pkg == row
}

// TestContributingNamesEveryPackage: a package added to the product gets a
// row in CONTRIBUTING.md's layout table, and a row names no path that is
// gone.
func TestContributingNamesEveryPackage(t *testing.T) {
	rows := layoutPaths(t)
	if len(rows) == 0 {
		t.Fatal("CONTRIBUTING.md's layout table names no path")
	}
	for _, r := range rows {
		if _, err := os.Stat(filepath.Join("../..", r)); err != nil {
			t.Errorf("CONTRIBUTING.md's layout table names %s: %v", r, err)
		}
	}
	for _, p := range goList(t, false, "./...") {
		pkg, ok := own(p.ImportPath)
		if !ok || !inProduct(pkg) {
			continue
		}
		found := false
		for _, r := range rows {
			found = found || covers(r, pkg)
		}
		if !found {
			t.Errorf("%s: no row of CONTRIBUTING.md's layout table names it", pkg)
		}
	}
}

func inProduct(pkg string) bool {
	for _, root := range productRoots {
		if covers(root, pkg) || strings.HasPrefix(pkg, root+"/") {
			return true
		}
	}
	return false
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		row, pkg string
		want     bool
	}{
		{"core/", "core/pipeline", true}, {"core/", "core", true}, {"core/", "corex", false},
		{"policies", "policies", true}, {"policies", "policies/push", false},
		{"cmd/internal/cri", "cmd/internal/cri", true}, {"cmd/internal/cri", "cmd/internal/criu", false},
	} {
		if got := covers(tc.row, tc.pkg); got != tc.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tc.row, tc.pkg, got, tc.want)
		}
	}
}
