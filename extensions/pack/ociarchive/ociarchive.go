// Package ociarchive writes a container image as an OCI image layout in a
// tar, the archive `ctr images import` and `docker load` take, for
// plexusctl (extension images) and tools/image (plexus's own).
// go-containerregistry lays the image out; the tar has every entry owned
// by 0:0, with one time, in path order, so one image gives one archive.
package ociarchive

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteFile writes img to path as an OCI layout archive whose index names
// ref (a full image name) as the OCI ref.name and as containerd's
// io.containerd.image.name, which `ctr images import` names the image by.
// path is replaced only once the archive is whole.
func WriteFile(path string, img v1.Image, ref string) error {
	// The layout goes beside path, not in $TMPDIR, which may be a tmpfs
	// too small for an image.
	dir, err := os.MkdirTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	if err := writeLayout(dir, img, ref); err != nil {
		return fmt.Errorf("writing %s: laying out the image: %w", path, err)
	}
	return ReplaceFile(path, func(w io.Writer) error { return tarDir(w, dir) })
}

func writeLayout(dir string, img v1.Image, ref string) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	opts := []layout.Option{layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	})}
	// The platform lets an importer that keeps one platform pick it.
	if p := cf.Platform(); p != nil {
		opts = append(opts, layout.WithPlatform(*p))
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, opts...)
}

// tarDir writes dir's tree below the archive's root in path order, with a
// fixed owner, mode and time: only names and contents reach the archive.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Name, hdr.Mode, hdr.Typeflag = hdr.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(hdr)
		}
		if err := copyFile(tw, hdr, p); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func copyFile(tw *tar.Writer, hdr *tar.Header, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr.Size = fi.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// ReplaceFile has write fill a temporary file beside path, then renames
// it into place, so that path is never a partial archive.
func ReplaceFile(path string, write func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
