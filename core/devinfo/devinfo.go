// Package devinfo implements the NPWG Device Information Specification
// v1.1: the device plugin's file for an allocated device (s4.1), the CNI
// file plexus hands each attachment's delegate (s4.2, s5.1), and the
// device-info map that goes into network-status (s6.1).
package devinfo

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexus-cni/plexus/core/names"
)

// DefaultDir is the spec's root: dp/ and cni/ live under it (s4.1, s4.2).
const DefaultDir = "/var/run/k8s.cni.cncf.io/devinfo"

// Capability is the runtimeConfig key for the CNI file's path (s5.1).
const Capability = "CNIDeviceInfoFile"

// maxFile bounds what plexus reads; a device-info map is a few hundred bytes.
const maxFile = 64 << 10

// Files are the device-info files under one root directory.
type Files struct {
	Dir string // the root; empty means DefaultDir
}

func (f Files) root() string { return cmp.Or(f.Dir, DefaultDir) }

// DevicePluginFile is s4.1's path for a device of a resource ('/' in its
// name replaced by '-'), from validated parts.
func (f Files) DevicePluginFile(resource, deviceID string) (string, error) {
	if err := cmp.Or(names.ResourceName("resource name", resource), names.DeviceID("device ID", deviceID)); err != nil {
		return "", err
	}
	return filepath.Join(f.root(), "dp", strings.ReplaceAll(resource, "/", "-")+"-"+deviceID+"-device.json"), nil
}

// CNIFile is s4.2's path for one attachment, which the container and its
// interface identify (s4.2.1).
func (f Files) CNIFile(containerID, ifName string) (string, error) {
	if err := cmp.Or(names.ContainerID(containerID), names.Interface(ifName)); err != nil {
		return "", err
	}
	return filepath.Join(f.root(), "cni", containerID+"-"+ifName+"-device.json"), nil
}

// Prepare writes the CNI file for an attachment: a copy of the device
// plugin's file when it left one (s4.2.1), otherwise none, for the
// delegate's own (s5.1.2). It reports whether it copied.
func Prepare(dpFile, cniFile string) (bool, error) {
	data, err := readLimited(dpFile)
	if errors.Is(err, fs.ErrNotExist) {
		// A stale file from an earlier attachment must not pass for this one's.
		return false, Remove(cniFile)
	}
	if err != nil {
		return false, fmt.Errorf("device plugin's device-info file: %w", err)
	}
	if _, err := Validate(data); err != nil {
		return false, fmt.Errorf("device plugin's device-info file %s: %w", dpFile, err)
	}
	if err := os.MkdirAll(filepath.Dir(cniFile), 0o755); err != nil {
		return false, fmt.Errorf("device-info directory: %w", err)
	}
	if err := writeAtomic(cniFile, data); err != nil {
		return false, fmt.Errorf("writing the CNI device-info file: %w", err)
	}
	return true, nil
}

// Read returns the CNI file's device-info map for network-status (s6.1.1),
// nil when neither the device plugin nor the delegate wrote one.
func Read(cniFile string) (json.RawMessage, error) {
	data, err := readLimited(cniFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Validate(data)
}

// Remove deletes the CNI file (s4.2.1, on DEL); a missing file is fine.
func Remove(cniFile string) error {
	if err := os.Remove(cniFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the CNI device-info file: %w", err)
	}
	return nil
}

// Validate checks the s3 format's required keys and returns the map
// compacted, as network-status carries it.
func Validate(data []byte) (json.RawMessage, error) {
	var m struct {
		Type    *string `json:"type"`
		Version *string `json:"version"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a device-info JSON object: %w", err)
	}
	if m.Type == nil || *m.Type == "" {
		return nil, fmt.Errorf(`device-info lacks the required "type" (s3.1.1)`)
	}
	if m.Version == nil || *m.Version == "" {
		return nil, fmt.Errorf(`device-info lacks the required "version" (s3.1.2)`)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxFile)
	}
	return data, nil
}

// writeAtomic writes through a temporary file and a rename.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
