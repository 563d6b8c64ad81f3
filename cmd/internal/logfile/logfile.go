// Package logfile is plexus's logFile with size-based rotation
// (logOptions): a file past maxSize is renamed to a timestamped backup,
// optionally gzipped, and backups past maxBackups or maxAge are removed.
//
// In thin mode every CNI call is its own process appending to the same
// file, so rotation takes a flock on "<logFile>.lock" and re-checks the
// file under it: only one process renames, and the others reopen.
package logfile

import (
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// backupTime is the timestamp in a backup's name: sortable, no colons.
const backupTime = "2006-01-02T15-04-05.000"

// Writer appends to the log file and rotates it.
type Writer struct {
	path string
	r    Rotation
	now  func() time.Time

	mu sync.Mutex
	f  *os.File
}

// Rotation says when the file is rotated and what is kept of it.
type Rotation struct {
	MaxBytes   int64         // the size at which the file is rotated (0: never)
	MaxBackups int           // how many rotated files are kept (0: all)
	MaxAge     time.Duration // how long a rotated file is kept (0: no limit)
	Compress   bool          // gzip rotated files
}

// Open opens path for appending, rotated as r says.
func Open(path string, r Rotation) (*Writer, error) {
	w := &Writer{path: path, r: r, now: time.Now}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("logFile: %w", err)
	}
	w.f = f
	return nil
}

// Write appends p, rotating first past maxSize; a failed rotation loses no line.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, os.ErrClosed
	}
	if w.r.MaxBytes > 0 {
		if fi, err := w.f.Stat(); err == nil && fi.Size()+int64(len(p)) > w.r.MaxBytes && fi.Size() > 0 {
			if err := w.rotate(); err != nil {
				fmt.Fprintf(os.Stderr, "plexus: rotating %s: %v\n", w.path, err)
			}
		}
	}
	return w.f.Write(p)
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// rotate renames the file to a backup, unless another process did, and reopens.
func (w *Writer) rotate() error {
	unlock, err := lockFile(w.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if w.sameFile() {
		if err := os.Rename(w.path, w.backupName()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	old := w.f
	if err := w.open(); err != nil {
		w.f = old
		return err
	}
	old.Close()
	return w.tidy()
}

// sameFile reports whether path is still the file this writer has open.
func (w *Writer) sameFile() bool {
	a, err1 := w.f.Stat()
	b, err2 := os.Stat(w.path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

func (w *Writer) backupName() string {
	dir, base := filepath.Split(w.path)
	ext := filepath.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	name := filepath.Join(dir, stem+"-"+w.now().UTC().Format(backupTime)+ext)
	for i := 1; exists(name) || exists(name+".gz"); i++ {
		name = filepath.Join(dir, fmt.Sprintf("%s-%s.%d%s", stem, w.now().UTC().Format(backupTime), i, ext))
	}
	return name
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

type backup struct {
	path string
	t    time.Time
}

// backups lists the rotated files of the log, newest first.
func (w *Writer) backups() ([]backup, error) {
	dir, base := filepath.Split(w.path)
	dir = cmp.Or(dir, ".")
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []backup
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, prefix) {
			continue
		}
		rest := strings.TrimSuffix(strings.TrimSuffix(n[len(prefix):], ".gz"), ext)
		if len(rest) < len(backupTime) {
			continue
		}
		t, err := time.Parse(backupTime, rest[:len(backupTime)])
		if err != nil {
			continue
		}
		out = append(out, backup{path: filepath.Join(dir, n), t: t})
	}
	slices.SortFunc(out, func(a, b backup) int {
		return cmp.Or(b.t.Compare(a.t), strings.Compare(b.path, a.path))
	})
	return out, nil
}

// tidy compresses backups and removes those past maxBackups or maxAge.
func (w *Writer) tidy() error {
	list, err := w.backups()
	if err != nil {
		return err
	}
	var errs []error
	cutoff := w.now().Add(-w.r.MaxAge)
	for i, b := range list {
		if (w.r.MaxBackups > 0 && i >= w.r.MaxBackups) || (w.r.MaxAge > 0 && b.t.Before(cutoff)) {
			errs = append(errs, os.Remove(b.path))
			continue
		}
		if w.r.Compress && !strings.HasSuffix(b.path, ".gz") {
			errs = append(errs, gzipFile(b.path))
		}
	}
	return errors.Join(errs...)
}

// gzipFile replaces p with p.gz.
func gzipFile(p string) error {
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := p + ".gz.tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p+".gz")
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(p)
}

func lockFile(p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
