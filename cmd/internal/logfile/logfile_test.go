package logfile

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// newTestWriter rotates at maxBytes with a clock that advances a second
// per reading.
func newTestWriter(t *testing.T, path string, maxBytes int64, r Rotation) *Writer {
	t.Helper()
	r.MaxBytes = maxBytes
	w, err := Open(path, r)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	w.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	t.Cleanup(func() { w.Close() })
	return w
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestRotation(t *testing.T) {
	line := strings.Repeat("x", 9) + "\n" // 10 bytes
	tests := []struct {
		name   string
		opts   Rotation
		writes int
		want   []string
	}{
		{name: "no rotation below the size", writes: 3, want: []string{"plexus.log"}},
		{name: "each full file becomes a backup", writes: 10, want: []string{"plexus-2026-01-10T12-00-01.000.log", "plexus-2026-01-10T12-00-03.000.log", "plexus-2026-01-10T12-00-05.000.log", "plexus.log"}},
		{name: "maxBackups keeps the newest", opts: Rotation{MaxBackups: 2}, writes: 10, want: []string{"plexus-2026-01-10T12-00-03.000.log", "plexus-2026-01-10T12-00-05.000.log", "plexus.log"}},
		{name: "compress gzips backups", opts: Rotation{Compress: true}, writes: 7, want: []string{"plexus-2026-01-10T12-00-01.000.log.gz", "plexus-2026-01-10T12-00-03.000.log.gz", "plexus.log"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := newTestWriter(t, filepath.Join(dir, "plexus.log"), 30, tt.opts)
			for i := 0; i < tt.writes; i++ {
				if _, err := w.Write([]byte(line)); err != nil {
					t.Fatal(err)
				}
			}
			if got := dirNames(t, dir); strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("files %v, want %v", got, tt.want)
			}
			fi, err := os.Stat(filepath.Join(dir, "plexus.log"))
			if err != nil || fi.Size() > 30 || fi.Size() == 0 {
				t.Errorf("current log %v, %v", fi, err)
			}
		})
	}
}

func TestCompressedBackupHoldsTheLines(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, filepath.Join(dir, "p.log"), 20, Rotation{Compress: true})
	for _, l := range []string{"first line\n", "second line\n", "third\n"} {
		if _, err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	names := dirNames(t, dir)
	if len(names) != 2 || !strings.HasSuffix(names[0], ".gz") {
		t.Fatalf("files %v", names)
	}
	f, err := os.Open(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || string(b) != "first line\n" {
		t.Errorf("backup holds %q, %v", b, err)
	}
}

func TestMaxAgeRemovesOldBackups(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "p-2025-01-01T00-00-00.000.log")
	unrelated := filepath.Join(dir, "p-notes.log")
	for _, p := range []string{old, unrelated} {
		if err := os.WriteFile(p, []byte("old\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w := newTestWriter(t, filepath.Join(dir, "p.log"), 10, Rotation{MaxAge: 30 * 24 * time.Hour})
	for i := 0; i < 3; i++ {
		w.Write([]byte("0123456\n"))
	}
	if exists(old) {
		t.Error("a backup older than maxAge is still there")
	}
	if !exists(unrelated) {
		t.Error("a file that is not a backup was removed")
	}
}

// Two processes appending to one log: one renames, the other reopens, and
// no line is lost.
func TestConcurrentWritersRotateOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.log")
	a := newTestWriter(t, path, 25, Rotation{})
	b := newTestWriter(t, path, 25, Rotation{})
	lines := []struct {
		w *Writer
		s string
	}{{a, "a1 ........\n"}, {b, "b1 ........\n"}, {a, "a2 ........\n"}, {b, "b2 ........\n"}}
	for _, l := range lines {
		if _, err := l.w.Write([]byte(l.s)); err != nil {
			t.Fatal(err)
		}
	}
	var all string
	for _, n := range dirNames(t, dir) {
		c, _ := os.ReadFile(filepath.Join(dir, n))
		all += string(c)
	}
	for _, l := range lines {
		if strings.Count(all, l.s) != 1 {
			t.Errorf("line %q appears %d times in %q", l.s, strings.Count(all, l.s), all)
		}
	}
	if n := len(dirNames(t, dir)); n != 2 {
		t.Errorf("%d files, want the log and one backup: %v", n, dirNames(t, dir))
	}
}
