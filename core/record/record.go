// Package record keeps, per container, the attachments plexus made, so DEL
// can undo them after the pod, its NADs or the source are gone (s7.2).
package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/plexus-cni/plexus/core/names"
)

// Version is the record format; another version is corrupt (DEL falls
// back to libcni's cache).
const Version = 1

// maxIDLen keeps file names under common file system limits.
const maxIDLen = 200

// State is how far an attachment got.
type State string

const (
	// Planned attachments were never started; DEL skips them.
	Planned State = "planned"
	// Attempted attachments had their delegate ADD started; DEL undoes them.
	Attempted State = "attempted"
	// Attached attachments completed ADD.
	Attached State = "attached"
)

// Attachment is what DEL needs to undo one attachment.
type Attachment struct {
	// Name is the status name ("namespace/name" or the default network's).
	Name    string `json:"name"`
	Default bool   `json:"default,omitempty"`
	IfName  string `json:"ifName"`
	// Config is the conflist exactly as it was given to libcni.
	Config         json.RawMessage `json:"config"`
	CNIArgs        [][2]string     `json:"cniArgs,omitempty"`
	CapabilityArgs map[string]any  `json:"capabilityArgs,omitempty"`
	State          State           `json:"state"`
	// Fixed marks an attachment the config chose for every pod
	// (defaultNetworks): a change of the pod's selection never detaches it.
	Fixed bool `json:"fixed,omitempty"`
	// DeviceInfoFile is the attachment's CNI device-info file (device-info
	// spec s4.2), removed on DEL; empty without a device.
	DeviceInfoFile string `json:"deviceInfoFile,omitempty"`
	// Rejected is the error a delegate of an Attempted attachment answered
	// its ADD with, as "code: message". A DEL answered with the same error
	// means that delegate refuses its config and did nothing to undo.
	Rejected string `json:"rejected,omitempty"`
}

// Pod identifies the pod the container belongs to.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Record is one container's attachments, in ADD order.
type Record struct {
	Version     int    `json:"version"`
	ContainerID string `json:"containerID"`
	// NetNS is the sandbox ADD used; DEL prefers the runtime's current
	// value and falls back to this one (GC has none).
	NetNS       string       `json:"netns,omitempty"`
	Pod         *Pod         `json:"pod,omitempty"`
	Attachments []Attachment `json:"attachments"`
	// Boot is the kernel's boot ID (Store.Boot) when the record was last
	// saved; empty when it was unknown.
	Boot string `json:"boot,omitempty"`
}

// ErrCorrupt is wrapped when a record exists but cannot be used.
var ErrCorrupt = errors.New("attachment record is corrupt")

// Store keeps records as one file per container in Dir. The file is a
// journal: every Save appends the whole record as one JSON line (a few
// microseconds, where write-and-rename cost hundreds), and the last
// complete line is the record. A crash mid-append leaves a line without
// its newline, which Decode ignores.
type Store struct {
	Dir string
	// Boot is the running kernel's boot ID, stamped on every Save; empty
	// when unknown, and then no record counts as saved in this boot.
	Boot string
}

// Trusted reports whether r lists all libcni cached for its container: it
// ends a finished ADD and was saved since the node booted (each attachment
// is saved before its delegate runs; only a node's crash loses a save).
func (s *Store) Trusted(r *Record) bool {
	for _, a := range r.Attachments {
		if a.State != Attached {
			return false
		}
	}
	return s.Boot != "" && r.Boot == s.Boot
}

func (s *Store) path(containerID string) (string, error) { return fileOf(s.Dir, containerID, ".json") }

// fileOf is the container's file in dir, for a valid container ID.
func fileOf(dir, containerID, suffix string) (string, error) {
	if err := names.ContainerID(containerID); err != nil {
		return "", err
	}
	if len(containerID) > maxIDLen {
		return "", fmt.Errorf("container ID is %d characters, over the limit of %d", len(containerID), maxIDLen)
	}
	return filepath.Join(dir, containerID+suffix), nil
}

// Load returns the container's record, (nil, nil) when there is none, or an
// error wrapping ErrCorrupt when the file cannot be decoded.
func (s *Store) Load(containerID string) (*Record, error) {
	p, err := s.path(containerID)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err == nil && !fi.Mode().IsRegular() {
		// Not plexus's doing, but DEL must still get past it (s7.2).
		return nil, fmt.Errorf("%s is a %s, not a file: %w", p, fi.Mode().Type(), ErrCorrupt)
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading attachment record: %w", err)
	}
	r, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if r.ContainerID != containerID {
		return nil, fmt.Errorf("%s holds container %q: %w", p, r.ContainerID, ErrCorrupt)
	}
	return r, nil
}

// Decode parses and checks the record in a journal: its last complete
// line, or the whole content without a newline. A last line that does not
// decode is corruption: an older line could lack attachments made since.
func Decode(b []byte) (*Record, error) {
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		// Drop a torn tail, then take the line before the final newline.
		b = b[:i]
		b = b[bytes.LastIndexByte(b, '\n')+1:]
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, r.Version, Version)
	}
	for i, a := range r.Attachments {
		if err := checkAttachment(a); err != nil {
			return nil, fmt.Errorf("%w: attachment %d: %v", ErrCorrupt, i, err)
		}
	}
	return &r, nil
}

func checkAttachment(a Attachment) error {
	if err := names.Interface(a.IfName); err != nil {
		return err
	}
	switch a.State {
	case Planned, Attempted, Attached:
	default:
		return fmt.Errorf("unknown state %q", a.State)
	}
	if len(a.Config) == 0 {
		return fmt.Errorf("no config")
	}
	if a.DeviceInfoFile != "" && (!filepath.IsAbs(a.DeviceInfoFile) || filepath.Clean(a.DeviceInfoFile) != a.DeviceInfoFile) {
		return fmt.Errorf("device-info file %q is not a clean absolute path", a.DeviceInfoFile)
	}
	return nil
}

// Save appends the record to the container's journal. No fsync: the
// record must survive plexus being killed, which the page cache ensures.
func (s *Store) Save(r *Record) error {
	r.Version, r.Boot = Version, s.Boot
	p, err := s.path(r.ContainerID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding attachment record: %w", err)
	}
	// One write call per line, so that concurrent readers and a crash see
	// whole lines or a tail without a newline.
	b = append(b, '\n')
	if err := writeIn(s.Dir, p, os.O_APPEND, b); err != nil {
		return fmt.Errorf("writing attachment record: %w", err)
	}
	return nil
}

// writeIn is writeFile, creating dir, the file's, only when it is missing.
func writeIn(dir, p string, flag int, b []byte) error {
	err := writeFile(p, flag, b)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = writeFile(p, flag, b)
		}
	}
	return err
}

// writeFile writes b to the file at p in one call, creating it and
// opening it with flag added, never through a symbolic link.
func writeFile(p string, flag int, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW|flag, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Remove deletes the container's record; a missing record is not an error.
func (s *Store) Remove(containerID string) error {
	return removeFile(s.path, containerID, "attachment record")
}

// removeFile removes the container's file at path(containerID).
// RemoveAll: whatever sits there goes, even a directory; the path is
// inside the directory (the container ID was validated).
func removeFile(path func(string) (string, error), containerID, what string) error {
	p, err := path(containerID)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing %s: %w", what, err)
	}
	return nil
}

// LastWrite is when the container's record was last saved (the journal's
// modification time); no record is an error wrapping os.ErrNotExist.
// plexusd's stale-record collection spares records written recently.
func (s *Store) LastWrite(containerID string) (time.Time, error) {
	p, err := s.path(containerID)
	if err != nil {
		return time.Time{}, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return time.Time{}, fmt.Errorf("attachment record of %s: %w", containerID, err)
	}
	return fi.ModTime(), nil
}

// List returns the container IDs that have a record.
func (s *Store) List() ([]string, error) { return listIDs(s.Dir, ".json", "attachment records") }

// listIDs lists the container IDs of dir's files named <ID><suffix>; a
// valid ID starts with an alphanumeric, so no temporary file passes.
func listIDs(dir, suffix, what string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), suffix); ok && names.ContainerID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
