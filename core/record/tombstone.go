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

// slotPrefix starts every slot's name; the container named inside decides
// whose it is, so a file of another layout never reads as a tombstone.
const slotPrefix = "slot."

// Tombstones remember, per container, that a DEL finished, so that the
// runtime's repeated DEL (containerd sends one without a netns) runs no
// delegate again. Each is one of Max slot files, chosen by a hash of the
// container ID and holding it, the interface and the kernel's boot ID: a
// Put is one write however many there are. A container hashed to a taken
// slot displaces the older tombstone, which then costs one full DEL.
type Tombstones struct {
	Dir string
	Max int // DefaultMaxTombstones when zero
	// Boot is the running kernel's boot ID (Store.Boot); empty when unknown.
	Boot string
}

// slotOf is the path of the container's slot.
func (t *Tombstones) slotOf(containerID string) (string, error) {
	if _, err := fileOf(t.Dir, containerID, ""); err != nil { // the ID's checks
		return "", err
	}
	slots := uint32(DefaultMaxTombstones)
	if t.Max > 0 {
		slots = uint32(t.Max)
	}
	h := fnv.New32a()
	h.Write([]byte(containerID))
	return filepath.Join(t.Dir, slotPrefix+strconv.Itoa(int(h.Sum32()%slots))), nil
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
	if err := writeIn(t.Dir, p, 0, b); err != nil {
		return fmt.Errorf("writing tombstone: %w", err)
	}
	return nil
}

// Lookup reports whether a finished DEL of the container's ifName is
// remembered, and whether it finished since the node booted. Any doubt
// (unreadable, another interface) is no.
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
const maxSlotBytes = maxIDLen + 1 + 16 + 1 + BootIDLen

// BootIDLen is the length of the kernel's boot ID, a UUID.
const BootIDLen = 36

// slot is what a tombstone file says.
type slot struct{ containerID, ifName, boot string }

// readSlot returns what a slot says; ok is false when it is missing, not
// a regular file or not a tombstone. An overlong boot ID reads as unknown.
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
	if len(lines) == 3 && len(lines[2]) <= BootIDLen {
		s.boot = lines[2]
	}
	return s, true
}

// removeSlot removes p, whatever it is (RemoveAll: a directory left there
// too); a missing one is not an error.
func removeSlot(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing tombstone: %w", err)
	}
	return nil
}
