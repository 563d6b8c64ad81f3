package record

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/plexus-cni/plexus/core/names"
)

// DefaultMaxTombstones bounds how many finished DELs are remembered.
const DefaultMaxTombstones = 1024

// slotPrefix starts every slot's name. The container named inside a slot
// decides whose tombstone it is, so a file of another layout (one named by
// its container, holding only the interface) never reads as one.
const slotPrefix = "slot."

// Tombstones remember, per container, that a DEL finished, so that the
// runtime's repeated DEL (containerd sends one without a netns) runs no
// delegate again. A container's tombstone lives in one of Max slot files,
// chosen by a hash of its ID and holding the ID and the interface name:
// the directory never holds more than Max files, and a DEL's Put costs one
// write however many there are. Another container hashed to the same slot
// overwrites it; a forgotten tombstone only costs a full DEL.
type Tombstones struct {
	Dir string
	Max int // DefaultMaxTombstones when zero
}

// slotOf is the path of the container's slot.
func (t *Tombstones) slotOf(containerID string) (string, error) {
	if err := names.ContainerID(containerID); err != nil {
		return "", err
	}
	if len(containerID) > maxIDLen {
		return "", fmt.Errorf("container ID is %d characters, over the limit of %d", len(containerID), maxIDLen)
	}
	h := fnv.New32a()
	h.Write([]byte(containerID))
	return filepath.Join(t.Dir, slotPrefix+strconv.Itoa(int(h.Sum32()%uint32(t.slots())))), nil
}

func (t *Tombstones) slots() int {
	if t.Max <= 0 {
		return DefaultMaxTombstones
	}
	return t.Max
}

// Put records that the DEL of the container's ifName finished.
func (t *Tombstones) Put(containerID, ifName string) error {
	p, err := t.slotOf(containerID)
	if err != nil {
		return err
	}
	if err := names.Interface(ifName); err != nil {
		return err
	}
	// Every slot is maxSlotBytes long, so a Put overwrites in place: no
	// truncation, which ext4 answers with a flush on close.
	b := make([]byte, maxSlotBytes)
	for i := copy(b, containerID+"\n"+ifName); i < len(b); i++ {
		b[i] = '\n'
	}
	err = writeFile(p, 0, b)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(t.Dir, 0o700); err != nil {
			return fmt.Errorf("creating tombstone directory: %w", err)
		}
		err = writeFile(p, 0, b)
	}
	if err != nil {
		return fmt.Errorf("writing tombstone: %w", err)
	}
	return nil
}

// Has reports whether a finished DEL of the container's ifName is
// remembered. Any doubt (unreadable, another interface) is no.
func (t *Tombstones) Has(containerID, ifName string) bool {
	p, err := t.slotOf(containerID)
	if err != nil {
		return false
	}
	id, got, ok := readSlot(p)
	return ok && ifName != "" && id == containerID && got == ifName
}

// Remove forgets the container's tombstone; none is not an error.
func (t *Tombstones) Remove(containerID string) error {
	p, err := t.slotOf(containerID)
	if err != nil {
		return err
	}
	if id, _, ok := readSlot(p); !ok || id != containerID {
		return nil // another container's, or none
	}
	return removeSlot(p)
}

// Prune removes the tombstones of containers keep does not want, and any
// file in Dir that is not a readable slot.
func (t *Tombstones) Prune(keep func(containerID string) bool) error {
	entries, err := os.ReadDir(t.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing tombstones: %w", err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(t.Dir, e.Name())
		if id, _, ok := readSlot(p); ok && strings.HasPrefix(e.Name(), slotPrefix) && keep(id) {
			continue
		}
		errs = append(errs, removeSlot(p))
	}
	return errors.Join(errs...)
}

// maxSlotBytes is a slot's size: an ID, a newline, an interface name and
// newlines up to it.
const maxSlotBytes = maxIDLen + 1 + 16

// readSlot returns the container and interface a slot names; ok is false
// when it is missing, not a regular file or not a tombstone.
func readSlot(p string) (containerID, ifName string, ok bool) {
	// O_NONBLOCK: a FIFO left there reads as empty instead of blocking.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSlotBytes+1))
	if err != nil || len(b) > maxSlotBytes {
		return "", "", false
	}
	containerID, ifName, found := strings.Cut(strings.TrimRight(string(b), "\n"), "\n")
	if !found || names.ContainerID(containerID) != nil || names.Interface(ifName) != nil {
		return "", "", false
	}
	return containerID, ifName, true
}

// removeSlot removes p, whatever it is (RemoveAll: a directory left there
// too); a missing one is not an error.
func removeSlot(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing tombstone: %w", err)
	}
	return nil
}
