package revision

import (
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

// SpecFiles checks the object's file names and sizes and returns its files
// by name, modules and data in one directory as the loader reads them.
func SpecFiles(p *plexusapi.AttachmentPolicy) (map[string][]byte, error) {
	if len(p.Spec.Modules)+len(p.Spec.Data) == 0 {
		return nil, fmt.Errorf("AttachmentPolicy %q: spec has no modules and no data", p.Name)
	}
	switch p.Spec.OnDelete {
	case "", plexusapi.OnDeleteKeep, plexusapi.OnDeleteAllowAll:
	default:
		return nil, fmt.Errorf("AttachmentPolicy %q: spec.onDelete %q: want %s or %s", p.Name, p.Spec.OnDelete, plexusapi.OnDeleteKeep, plexusapi.OnDeleteAllowAll)
	}
	files := map[string][]byte{}
	total := 0
	for _, part := range []struct {
		field string
		m     map[string]string
		ok    func(string) bool
	}{
		{"modules", p.Spec.Modules, moduleName.MatchString},
		{"data", p.Spec.Data, dataName.MatchString},
	} {
		if len(part.m) > MaxFiles {
			return nil, fmt.Errorf("AttachmentPolicy %q: spec.%s has %d files, more than %d", p.Name, part.field, len(part.m), MaxFiles)
		}
		for name, text := range part.m {
			if !part.ok(name) {
				return nil, fmt.Errorf("AttachmentPolicy %q: spec.%s[%q]: not an allowed file name", p.Name, part.field, name)
			}
			if len(text) > MaxFileBytes {
				return nil, fmt.Errorf("AttachmentPolicy %q: spec.%s[%q]: %d bytes, more than %d", p.Name, part.field, name, len(text), MaxFileBytes)
			}
			total += len(text)
			files[name] = []byte(text)
		}
	}
	if total > MaxTotalBytes {
		return nil, fmt.Errorf("AttachmentPolicy %q: %d bytes of files, more than %d", p.Name, total, MaxTotalBytes)
	}
	return files, nil
}

// Revision names a revision: the object's generation and the first 12 hex
// digits of a SHA-256 over its files' sorted names and contents.
func Revision(generation int64, files map[string][]byte) string {
	return fmt.Sprintf("%d-%s", generation, Digest(files)[:12])
}

// Digest hashes files' names and contents in name order.
func Digest(files map[string][]byte) string {
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// HasTests says whether files hold a *_test.rego module.
func HasTests(files map[string][]byte) bool {
	for n := range files {
		if strings.HasSuffix(n, "_test.rego") {
			return true
		}
	}
	return false
}

// readDefaults reads the defaultPaths: files, or directories whose files
// (not subdirectories) are taken, each with a name a revision may hold.
func readDefaults(paths []string) (map[string][]byte, error) {
	files := map[string][]byte{}
	total := 0
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf(`policy config: "defaultPaths": %w`, err)
		}
		found := []string{p}
		if info.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf(`policy config: "defaultPaths": %w`, err)
			}
			found = nil
			for _, e := range entries {
				if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && !strings.HasSuffix(e.Name(), "_test.rego") {
					found = append(found, filepath.Join(p, e.Name()))
				}
			}
		}
		for _, path := range found {
			name := filepath.Base(path)
			if !moduleName.MatchString(name) && !dataName.MatchString(name) {
				return nil, fmt.Errorf(`policy config: "defaultPaths": %s: not a .rego, .json, .yaml or .yml file with a plain name`, path)
			}
			if _, dup := files[name]; dup {
				return nil, fmt.Errorf(`policy config: "defaultPaths": two files named %s`, name)
			}
			b, err := readBounded(path, MaxFileBytes)
			if err != nil {
				return nil, fmt.Errorf(`policy config: "defaultPaths": %w`, err)
			}
			total += len(b)
			if total > MaxTotalBytes || len(files) >= 2*MaxFiles {
				return nil, fmt.Errorf(`policy config: "defaultPaths": more than %d files or %d bytes`, 2*MaxFiles, MaxTotalBytes)
			}
			files[name] = b
		}
	}
	return files, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}
