package policies

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/open-policy-agent/opa/v1/loader"
)

// Files lists the policy and data files the engine reads under paths, as
// its loader walks them (recursively, following symlinks, skipping hidden
// entries, test modules and other types; "data.path:" prefixes accepted).
// plexusd hashes these files to notice a change without loading them.
func Files(paths []string) ([]string, error) {
	return walk(paths, false, func(string, int) bool { return true })
}

// walk lists, in order, the files LoadPaths would read under paths that
// keep takes (depth 0: named directly). It is the loader's walk with
// LoadPaths's filter, so the two never disagree on a directory.
func walk(paths []string, tests bool, keep func(path string, depth int) bool) ([]string, error) {
	if err := checkPaths(paths); err != nil {
		return nil, err
	}
	var files []string
	skip := fileFilter(tests)
	_, err := loader.FilteredPaths(paths, func(path string, info fs.FileInfo, depth int) bool {
		if skip(path, info, depth) {
			return true
		}
		if !info.IsDir() && keep(path, depth) {
			files = append(files, path)
		}
		return false
	})
	if err != nil {
		return files, fmt.Errorf("listing policy files in %s: %w", strings.Join(paths, ", "), err)
	}
	return files, nil
}
