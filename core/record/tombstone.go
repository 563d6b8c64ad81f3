package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/plexus-cni/plexus/core/names"
)

// DefaultMaxTombstones bounds how many finished DELs are remembered.
const DefaultMaxTombstones = 1024

// Tombstones remember, per container, that a DEL finished, so that the
// runtime's repeated DEL (containerd sends one without a netns) runs no
// delegate again. One file per container in Dir holds the interface name;
// ADD and GC remove them, and Put keeps at most Max, the oldest going
// first (a forgotten tombstone only costs a full DEL).
type Tombstones struct {
	Dir string
	Max int // DefaultMaxTombstones when zero
}

func (t *Tombstones) path(containerID string) (string, error) { return fileOf(t.Dir, containerID, "") }

// Put records that the DEL of the container's ifName finished.
func (t *Tombstones) Put(containerID, ifName string) error {
	p, err := t.path(containerID)
	if err != nil {
		return err
	}
	if err := names.Interface(ifName); err != nil {
		return err
	}
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return fmt.Errorf("creating tombstone directory: %w", err)
	}
	if err := writeFile(p, os.O_TRUNC, []byte(ifName)); err != nil {
		return fmt.Errorf("writing tombstone: %w", err)
	}
	return t.bound()
}

// Has reports whether a finished DEL of the container's ifName is
// remembered. Any doubt (unreadable, another interface) is no.
func (t *Tombstones) Has(containerID, ifName string) bool {
	p, err := t.path(containerID)
	if err != nil {
		return false
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, _ := f.Read(buf)
	return ifName != "" && string(buf[:n]) == ifName
}

// Remove forgets the container's tombstone; none is not an error.
func (t *Tombstones) Remove(containerID string) error {
	return removeFile(t.path, containerID, "tombstone")
}

// Prune removes the tombstones of containers keep does not want.
func (t *Tombstones) Prune(keep func(containerID string) bool) error {
	ids, err := t.list()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if !keep(id) {
			errs = append(errs, t.Remove(id))
		}
	}
	return errors.Join(errs...)
}

func (t *Tombstones) list() ([]string, error) { return listIDs(t.Dir, "", "tombstones") }

// bound removes the oldest tombstones once there are more than Max, down
// to three quarters, so the pass that reads their times is rare.
func (t *Tombstones) bound() error {
	limit := t.Max
	if limit <= 0 {
		limit = DefaultMaxTombstones
	}
	d, err := os.Open(t.Dir)
	if err != nil {
		return fmt.Errorf("listing tombstones: %w", err)
	}
	// io.EOF when there are fewer; any other error leaves it to the next Put.
	seen, _ := d.Readdirnames(limit + 1)
	d.Close()
	if len(seen) <= limit {
		return nil
	}
	return t.pruneOldest(limit * 3 / 4)
}

func (t *Tombstones) pruneOldest(keep int) error {
	ids, err := t.list()
	if err != nil {
		return err
	}
	mtime := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		if fi, err := os.Lstat(filepath.Join(t.Dir, id)); err == nil {
			mtime[id] = fi.ModTime()
		}
	}
	sort.Slice(ids, func(i, j int) bool { return mtime[ids[i]].Before(mtime[ids[j]]) })
	var errs []error
	for _, id := range ids[:max(len(ids)-keep, 0)] {
		errs = append(errs, t.Remove(id))
	}
	return errors.Join(errs...)
}
