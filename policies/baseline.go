package policies

import (
	"context"
	"embed"
	"fmt"
	"os"
	"path/filepath"
)

// BaselineFile is the data file, next to the library directory, that
// enables the baseline policy (docs/security.md).
const BaselineFile = "baseline.yaml"

// baselineFiles are the library and baseline data this binary was built
// with, so that tools without a checkout (plexusctl migrate) decide as the
// shipped files do. LoadPaths skips the library's tests.
//
//go:embed baseline.yaml library/*.rego
var baselineFiles embed.FS

// NewBaseline compiles the embedded rule library and baseline data, with
// the longest deadline: it is meant for offline decisions.
func NewBaseline(ctx context.Context) (*Engine, error) {
	dir, err := os.MkdirTemp("", "plexus-baseline-")
	if err != nil {
		return nil, fmt.Errorf("baseline policy: %w", err)
	}
	defer os.RemoveAll(dir)
	// The loader reads files by path; the engine keeps nothing of them
	// once compiled, so the copy can go when New returns.
	library, baseline, err := WriteBaseline(dir)
	if err != nil {
		return nil, err
	}
	return New(ctx, Config{Paths: []string{library, baseline}, Deadline: Duration(MaxDeadline)})
}

// WriteBaseline writes the rule library and the baseline data embedded in
// this binary under dir (dir/library, dir/baseline.yaml), for tools
// without the image's copy (plexusctl policy push tests against it).
func WriteBaseline(dir string) (library, baseline string, err error) {
	if err := os.CopyFS(dir, baselineFiles); err != nil {
		return "", "", fmt.Errorf("baseline policy: writing its files: %w", err)
	}
	return filepath.Join(dir, "library"), filepath.Join(dir, BaselineFile), nil
}

// BaselineData is the baseline's data file as built into this binary,
// which the image ships too: the starting point of an admin's own policy.
func BaselineData() []byte {
	b, err := baselineFiles.ReadFile(BaselineFile)
	if err != nil {
		panic("policies: the embedded baseline is missing: " + err.Error())
	}
	return b
}
