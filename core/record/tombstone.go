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
// chosen by a hash of its ID and holding the ID, the interface name and
// the kernel's boot ID:
// the directory never holds more than Max files, and a DEL's Put costs one
// write however many there are. Another container hashed to the same slot
// overwrites it; a forgotten tombstone only costs a full DEL.
type Tombstones struct {
	Dir string
	Max int // DefaultMaxTombstones when zero
	// Boot is the running kernel's boot ID (Store.Boot); empty when unknown.
	Boot string
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
	for i := copy(b, containerID+"\n"+ifName+"\n"+t.Boot); i < len(b); i++ {
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
	found, _ := t.Lookup(containerID, ifName)
	return found
}

// Lookup is Has, and whether that DEL finished since the node booted.
func (t *Tombstones) Lookup(containerID, ifName string) (found, thisBoot bool) {
	p, err := t.slotOf(containerID)
	if err != nil {
		return false, false
	}
	s, ok := readSlot(p)
	found = ok && ifName != "" && s.containerID == containerID && s.ifName == ifName
	return found, found && t.Boot != "" && s.boot == t.Boot
}

// Remove forgets the container's tombstone; none is not an error.
func (t *Tombstones) Remove(containerID string) error {
	p, err := t.slotOf(containerID)
	if err != nil {
		return err
	}
	if s, ok := readSlot(p); !ok || s.containerID != containerID {
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
		if s, ok := readSlot(p); ok && strings.HasPrefix(e.Name(), slotPrefix) && keep(s.containerID) {
			continue
		}
		errs = append(errs, removeSlot(p))
	}
	return errors.Join(errs...)
}

// maxSlotBytes is a slot's size: an ID, an interface name and a boot ID
// on three lines, and newlines up to it.
const maxSlotBytes = maxIDLen + 1 + 16 + 1 + maxBootLen

// maxBootLen is a boot ID's length (a UUID).
const maxBootLen = 36

// slot is what a tombstone file says.
type slot struct{ containerID, ifName, boot string }

// readSlot returns what a slot says; ok is false when it is missing, not
// a regular file or not a tombstone. A boot ID that is not one reads as
// unknown.
func readSlot(p string) (s slot, ok bool) {
	// O_NONBLOCK: a FIFO left there reads as empty instead of blocking.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return slot{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSlotBytes+1))
	if err != nil || len(b) > maxSlotBytes {
		return slot{}, false
	}
	lines := strings.SplitN(strings.TrimRight(string(b), "\n"), "\n", 3)
	if len(lines) < 2 || names.ContainerID(lines[0]) != nil || names.Interface(lines[1]) != nil {
		return slot{}, false
	}
	s = slot{containerID: lines[0], ifName: lines[1]}
	if len(lines) == 3 && IsBootID(lines[2]) {
		s.boot = lines[2]
	}
	return s, true
}

// IsBootID reports whether s has the form of a kernel boot ID: a UUID in
// lower-case hex.
func IsBootID(s string) bool {
	if len(s) != maxBootLen {
		return false
	}
	for i, c := range s {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (c == '-') || !dash && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// removeSlot removes p, whatever it is (RemoveAll: a directory left there
// too); a missing one is not an error.
func removeSlot(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing tombstone: %w", err)
	}
	return nil
}
