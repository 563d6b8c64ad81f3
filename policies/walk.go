package policies

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/open-policy-agent/opa/v1/loader"
)

// Files lists the policy and data files the engine reads under paths, as
// its loader walks them: directories are walked recursively, symlinks to
// files and to directories are followed, hidden entries are skipped inside
// directories, and so are test modules and files of other types. A
// "data.path:" prefix on a path is accepted as the loader accepts it.
// plexusd hashes these files to notice a change without loading them.
func Files(paths []string) ([]string, error) {
	var files []string
	err := walk(paths, false, func(path string, _ int) {
		files = append(files, path)
	})
	return files, err
}

// walk calls fn with each file LoadPaths would read under paths and its
// depth (0: named directly), in the loader's order. It is the loader's own
// walk with LoadPaths's filter, so the two never disagree on what a policy
// directory holds.
func walk(paths []string, tests bool, fn func(path string, depth int)) error {
	if err := checkPaths(paths); err != nil {
		return err
	}
	skip := fileFilter(tests)
	_, err := loader.FilteredPaths(paths, func(path string, info fs.FileInfo, depth int) bool {
		if skip(path, info, depth) {
			return true
		}
		if !info.IsDir() {
			fn(path, depth)
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("listing policy files in %s: %w", strings.Join(paths, ", "), err)
	}
	return nil
}
