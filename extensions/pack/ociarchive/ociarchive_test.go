package ociarchive

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func testImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "arm64"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// The same image gives the same bytes, whenever and wherever written.
func TestSameImageGivesTheSameArchive(t *testing.T) {
	img := testImage(t)
	var archives [][]byte
	for range 2 {
		path := filepath.Join(t.TempDir(), "img.tar")
		if err := WriteFile(path, img, "example.org/x:1"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("archives of the same image differ")
	}
	tr := tar.NewReader(bytes.NewReader(archives[0]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: owner %d:%d (%q:%q), time %v; want 0:0 at the epoch", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
	}
}

// The archive is an OCI layout whose one image is img itself, named ref
// for containerd and for OCI tools, with its platform.
func TestArchiveIsTheImageUnderItsName(t *testing.T) {
	img := testImage(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "img.tar")
	const ref = "example.org/plexus/x:1"
	if err := WriteFile(path, img, ref); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only the archive", dir, len(entries))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("archive: %v, mode %v; want 0644", err, fi.Mode())
	}
	out := t.TempDir()
	untar(t, path, out)
	idx, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if len(im.Manifests) != 1 {
		t.Fatalf("index holds %d manifests, want 1", len(im.Manifests))
	}
	d := im.Manifests[0]
	if d.Digest != want || d.Annotations["io.containerd.image.name"] != ref || d.Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Errorf("index entry %s %v, want %s named %s", d.Digest, d.Annotations, want, ref)
	}
	if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != "arm64" {
		t.Errorf("index entry's platform %+v, want linux/arm64", d.Platform)
	}
	got, err := idx.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := got.Layers()
	if err != nil || len(ls) != 2 {
		t.Fatalf("image read back: %d layers, %v", len(ls), err)
	}
	for _, l := range ls {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			t.Errorf("layer read back: %v", err)
		}
	}
}

// A failed write leaves neither the file nor a temporary one behind, and
// an archive already there stays whole.
func TestFailedWriteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "img.tar")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ReplaceFile(path, func(w io.Writer) error {
		if _, err := w.Write([]byte("partial")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("%s holds %q, want the old archive", path, b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only the old archive", dir, len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.tar"), testImage(t), "example.org/x:1"); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
