package copier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopy(t *testing.T) {
	cases := []struct {
		name    string
		src     map[string]string
		dstFile bool // the destination is a file, not a directory
		want    string
		missing bool
	}{
		{name: "copies both", src: map[string]string{ModuleFile: "\x00asm", ManifestFile: "{}"}},
		{name: "no module", src: map[string]string{ManifestFile: "{}"}, want: ModuleFile, missing: true},
		{name: "destination not a directory", src: map[string]string{ModuleFile: "m", ManifestFile: "{}"}, dstFile: true, want: "is not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			for f, data := range c.src {
				if err := os.WriteFile(filepath.Join(src, f), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.dstFile {
				dst = filepath.Join(src, ManifestFile)
			}
			err := Copy(src, dst, Files)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) || Missing(err) != c.missing {
					t.Fatalf("err = %v, want %q (missing %v)", err, c.want, c.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dst)
			if len(ents) != len(Files) {
				t.Fatalf("destination holds %v, want only %v", ents, Files)
			}
			for f, data := range c.src {
				got, err := os.ReadFile(filepath.Join(dst, f))
				if err != nil || string(got) != data {
					t.Errorf("%s: %q, %v", f, got, err)
				}
				if st, _ := os.Stat(filepath.Join(dst, f)); st.Mode().Perm() != 0o444 {
					t.Errorf("%s mode %v, want read-only", f, st.Mode())
				}
			}
		})
	}
}
