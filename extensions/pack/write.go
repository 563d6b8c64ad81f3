package pack

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteArchive writes img as an OCI image layout in a tar archive
// (oci-layout, index.json, blobs/sha256/...), its index entry naming ref
// as the OCI ref.name and as containerd's io.containerd.image.name, from
// which `ctr -n k8s.io images import` names the image; the digest
// containerd records is the image's own, the one a push gives. The
// archive is written beside path and renamed into place.
func WriteArchive(img v1.Image, ref, path string) error {
	r, err := ParseRef(ref)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = writeLayout(img, r.Name(), tmp)
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

func writeLayout(img v1.Image, ref string, w io.Writer) error {
	desc, err := partial.Descriptor(img)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	desc.Platform = cf.Platform()
	desc.Annotations = map[string]string{"org.opencontainers.image.ref.name": ref, "io.containerd.image.name": ref}
	index, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{*desc}})
	if err != nil {
		return err
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/", nil},
		{"blobs/sha256/", nil},
		{blobPath(desc.Digest), rawManifest},
		{blobPath(m.Config.Digest), rawConfig},
	} {
		if err := writeEntry(tw, e.name, int64(len(e.data)), bytes.NewReader(e.data)); err != nil {
			return err
		}
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		if err := writeLayer(tw, l); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeLayer(tw *tar.Writer, l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return err
	}
	size, err := l.Size()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return writeEntry(tw, blobPath(d), size, rc)
}

func blobPath(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

// writeEntry writes a directory (name ending in "/") or a file of size
// bytes, with a fixed owner and time: the archive is reproducible too.
func writeEntry(tw *tar.Writer, name string, size int64, r io.Reader) error {
	hdr := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: size, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if name[len(name)-1] == '/' {
		hdr.Mode, hdr.Typeflag, hdr.Size = 0o755, tar.TypeDir, 0
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Push pushes img to the registry ref names, with the credentials docker
// login (or a credential helper it names) keeps; opts add to or override
// those options.
func Push(ctx context.Context, img v1.Image, ref string, opts ...remote.Option) error {
	r, err := ParseRef(ref)
	if err != nil {
		return err
	}
	all := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.Write(r, img, all...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}
