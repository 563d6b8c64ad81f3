package policies

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

// Loaded is what LoadPaths read: parsed modules by file name and the merged
// data document.
type Loaded struct {
	Modules map[string]*ast.Module
	Data    map[string]any
}

// LoadPaths reads .rego modules and .json/.yaml/.yml data files, following
// OPA's loader conventions so that a directory means the same thing to
// plexus as to OPA's own tools:
//
//   - a data file named, or directly in a named directory, is merged at
//     the root of data (its top level must be an object);
//   - one in its subdirectory d1/d2 is placed at data.d1.d2;
//   - a path written "a.b:PATH" places PATH's data under data.a.b;
//   - two files that set the same leaf are an error naming both.
//
// Hidden files and directories are skipped: a ConfigMap volume holds every
// file twice, once under a hidden "..<timestamp>" directory. Other
// extensions are skipped inside directories and refused when named. tests
// keeps *_test.rego files (fileFilter).
func LoadPaths(paths []string, tests bool) (*Loaded, error) {
	if err := checkPaths(paths); err != nil {
		return nil, err
	}
	res, err := loader.NewFileLoader().
		WithRegoVersion(ast.RegoV1).
		WithCapabilities(Capabilities()).
		WithProcessAnnotation(true).
		Filtered(paths, fileFilter(tests))
	if err != nil {
		return nil, fmt.Errorf("loading policy from %s: %w", strings.Join(paths, ", "), err)
	}
	modules := res.ParsedModules()
	if err := checkForbidden(modules); err != nil {
		return nil, err
	}
	return &Loaded{Modules: modules, Data: res.Documents}, nil
}

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

// fileFilter returns true for what LoadPaths skips. The engine leaves
// *_test.rego files out (tests are not policy); the tools keep them.
func fileFilter(tests bool) loader.Filter {
	return func(abspath string, info fs.FileInfo, depth int) bool {
		name := info.Name()
		if depth > 0 && strings.HasPrefix(name, ".") {
			return true
		}
		if info.IsDir() {
			return false
		}
		if !tests && strings.HasSuffix(name, "_test.rego") {
			return true
		}
		return depth > 0 && !knownExtension(name)
	}
}

// checkPaths requires at least one path, each existing, and refuses a
// named file that is neither Rego nor data rather than let OPA guess.
func checkPaths(paths []string) error {
	if len(paths) == 0 {
		return fmt.Errorf("no policy paths given")
	}
	for _, p := range paths {
		_, path := loader.SplitPrefix(p)
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("policy path %s: %w", p, err)
		}
		if !info.IsDir() && !knownExtension(path) {
			return fmt.Errorf("policy path %s: not a .rego, .json, .yaml or .yml file", p)
		}
	}
	return nil
}

func knownExtension(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".rego", ".json", ".yaml", ".yml":
		return true
	}
	return false
}
