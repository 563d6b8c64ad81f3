package policies

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFilesWalksAsTheLoaderReads: Files lists what the engine's loader
// reads, and nothing else, so plexusd reloads on exactly those changes.
func TestFilesWalksAsTheLoaderReads(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"p/a.rego":              "package a",
		"p/a_test.rego":         "package a_test",
		"p/data.json":           "{}",
		"p/sub/more.yaml":       "x: 1",
		"p/sub/deeper/d.yml":    "y: 1",
		"p/README.md":           "not policy",
		"p/.hidden.rego":        "package hidden",
		"p/.git/x.rego":         "package git",
		"p/..2026_01/cm.rego":   "package cm", // a ConfigMap volume's hidden copy
		"other/linked.rego":     "package linked",
		"otherdir/in.json":      "{}",
		"named.json":            "{}",
		"notes.txt":             "not policy",
		"test_only/b_test.rego": "package b_test",
		"q/ok.rego":             "package q",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"p/link.rego": "../other/linked.rego", // a ConfigMap volume's files are symlinks
		"p/linkdir":   "../otherdir",
		"p/..data":    "..2026_01",
		"q/dangling":  "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		paths []string
		want  []string // relative to dir; nil with err
		err   string
	}{
		{"a directory: modules, data files, subdirectories and symlinks", []string{"p"},
			[]string{"p/a.rego", "p/data.json", "p/link.rego", "p/linkdir/in.json", "p/sub/deeper/d.yml", "p/sub/more.yaml"}, ""},
		{"files named directly", []string{"named.json", "p/a.rego"}, []string{"named.json", "p/a.rego"}, ""},
		{"a test module named directly is still a test", []string{"p/a_test.rego"}, []string{}, ""},
		{"a data prefix", []string{"x.y:p/sub"}, []string{"p/sub/deeper/d.yml", "p/sub/more.yaml"}, ""},
		{"only tests", []string{"test_only"}, []string{}, ""},
		{"a named file of another type", []string{"notes.txt"}, nil, "not a .rego, .json, .yaml or .yml file"},
		{"a missing path", []string{"absent"}, nil, "no such file"},
		{"no paths", nil, nil, "no policy paths"},
		{"a dangling symlink fails as the loader fails", []string{"q"}, nil, "q/dangling: no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var paths []string
			for _, p := range tt.paths {
				prefix, p, ok := strings.Cut(p, ":")
				if !ok {
					prefix, p = "", prefix
				} else {
					prefix += ":"
				}
				paths = append(paths, prefix+filepath.Join(dir, p))
			}
			got, err := Files(paths)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rel := []string{}
			for _, f := range got {
				r, _ := filepath.Rel(dir, f)
				rel = append(rel, r)
			}
			slices.Sort(rel)
			if !slices.Equal(rel, tt.want) {
				t.Errorf("Files = %q, want %q", rel, tt.want)
			}
		})
	}
}

// TestFilesAreWhatLoadPathsReads: every file Files lists is loaded, and
// only those (one module and two data files here).
func TestFilesAreWhatLoadPathsReads(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.rego": "package a\nx := 1", "a_test.rego": "package a_test\ny := 1", "d.json": `{"d":1}`,
		"s/e.yaml": "e: 2", ".h/f.json": `{"f":3}`, "n.txt": "x",
	} {
		path := filepath.Join(dir, name)
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := Files([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadPaths([]string{dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || len(loaded.Modules) != 1 || loaded.Modules[filepath.Join(dir, "a.rego")] == nil {
		t.Errorf("Files %q, modules %v", files, loaded.Modules)
	}
	if s, _ := loaded.Data["s"].(map[string]any); s["e"] == nil || loaded.Data["d"] == nil || loaded.Data["f"] != nil {
		t.Errorf("data %v", loaded.Data)
	}
}
