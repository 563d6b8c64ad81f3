package install

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCopyIfChangedStreams: a binary is copied when the destination is
// absent or differs (in size, or in bytes past the first chunk), and left
// alone when identical.
func TestCopyIfChangedStreams(t *testing.T) {
	big := bytes.Repeat([]byte("plexus"), 50_000) // several 64 KiB chunks
	flipped := bytes.Clone(big)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		name        string
		dst         []byte // nil: absent
		wantChanged bool
	}{
		{"absent", nil, true},
		{"identical", big, false},
		{"same size, last byte differs", flipped, true},
		{"shorter", big[:len(big)-7], true},
		{"empty", []byte{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			if err := os.WriteFile(src, big, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.dst != nil {
				if err := os.WriteFile(dst, tc.dst, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			changed, err := copyIfChanged(src, dst, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, big) {
				t.Errorf("dst has %d bytes, not src's %d", len(got), len(big))
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o755 {
				t.Errorf("dst mode %v, want 0755", fi.Mode().Perm())
			}
		})
	}
}
