package faults

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// fullCacheDir mounts a small tmpfs at the World's cacheDir, unmounted
// when the test ends.
func fullCacheDir(t *testing.T, h *harness.World) {
	t.Helper()
	harness.Must(t, os.MkdirAll(h.CacheDir, 0o700))
	if err := syscall.Mount("tmpfs", h.CacheDir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(h.CacheDir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", h.CacheDir, err)
		}
	})
}

// fill writes to dir until the file system has no space left.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	harness.Must(t, err)
	defer f.Close()
	chunk := bytes.Repeat([]byte{'x'}, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return
		}
	}
}

// removeFiller frees the space again, so cleanup and leak checks see the
// cacheDir as plexus left it.
func removeFiller(t *testing.T, dir string) {
	harness.Must(t, os.Remove(filepath.Join(dir, "filler")))
}

// TestCacheDirFullBeforeAdd: with no space for the attachment record, ADD
// fails with code 108 before any delegate runs (the record must exist
// before the first attachment, s7.2), naming the cause.
func TestCacheDirFullBeforeAdd(t *testing.T) {
	f := newFault(t, "ok", "ok")
	h, c := faultWorld(t, positions()[2], f)
	fullCacheDir(t, h)
	fill(t, h.CacheDir)
	before := harness.HostVeths(t)
	_, e := h.Plugin(c, "ADD")
	assertCNIError(t, e, 108, "pod demo/web", "attachment record", "no space left on device")
	if _, err := os.Stat(f.Marker); err == nil {
		t.Error("a delegate ran although the record could not be written")
	}
	removeFiller(t, h.CacheDir)
	assertCleanThroughDel(t, h, c, before, "failed ADD")
}

// TestCacheDirFillsDuringAdd: the disk fills while the middle delegate
// runs. Saving its result fails; the ADD fails naming the network and the
// cause, and every attachment, including that one, is undone.
func TestCacheDirFillsDuringAdd(t *testing.T) {
	f := newFault(t, "block", "ok")
	h, c := faultWorld(t, positions()[2], f)
	fullCacheDir(t, h)
	before := harness.HostVeths(t)
	run := h.StartPlugin(c, "ADD")
	f.waitFor(t, "ADD", 1)
	fill(t, h.CacheDir)
	f.release(t)
	_, e, err := run.Wait()
	harness.Must(t, err)
	assertCNIError(t, e, 104, "pod demo/web", "demo/bad (net2)", "no space left on device")
	removeFiller(t, h.CacheDir)
	assertCleanThroughDel(t, h, c, before, "failed ADD")
}
