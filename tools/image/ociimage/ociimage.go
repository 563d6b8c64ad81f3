// Package ociimage builds container images from files on the host without a
// container engine: one layer holding the given files, a config with the
// given entrypoint, environment and labels (OCI media types), written as an
// archive that `ctr images import` (containerd 1.6 and later) accepts: an OCI
// image layout in a tar (WriteOCI), or docker save's format (Write), which
// `docker load` of every Docker version accepts too.
//
// Builds are reproducible: every timestamp is Spec.Created (SOURCE_DATE_EPOCH
// or the Unix epoch), owners are 0:0, entries are sorted and the layer's gzip
// header carries no name or time, so the same inputs give the same digests.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/plexus-cni/plexus/extensions/pack/ociarchive"
)

// File is one host file copied into the image.
type File struct {
	Src  string      // path on the host
	Dst  string      // absolute path in the image
	Mode fs.FileMode // permission bits in the image
}

// Spec is everything an image is built from.
type Spec struct {
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=VALUE
	Labels     map[string]string
	User       string
	WorkingDir string
	OS         string // "linux" when empty
	Arch       string // GOARCH spelling; required
	Created    time.Time
}

// dirMode is the mode of the parent directories the builder creates, the
// same as an engine's COPY gives them.
const dirMode fs.FileMode = 0o755

// Build returns the image Spec describes. Every file is read now, so a
// missing or unreadable input fails here with its path.
func Build(spec Spec) (v1.Image, error) {
	if spec.Arch == "" {
		return nil, errors.New("image spec: no architecture")
	}
	layerTar, err := layerTarball(spec.Files, spec.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	created := v1.Time{Time: spec.Created.UTC()}
	cf.Created = created
	cf.OS = spec.OS
	if cf.OS == "" {
		cf.OS = "linux"
	}
	cf.Architecture = spec.Arch
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		Env:        spec.Env,
		Labels:     spec.Labels,
		User:       spec.User,
		WorkingDir: spec.WorkingDir,
	}
	cf.History = []v1.History{{Created: created, CreatedBy: "plexus ociimage: files"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// Write writes img as a Docker image archive (manifest.json with RepoTags)
// to path, tagged ref. ctr import names the image ref but records a
// manifest of its own composing, so its digest is not img's. path is
// replaced only once the archive is whole.
func Write(img v1.Image, ref, path string) error {
	tag, err := ParseRef(ref)
	if err != nil {
		return err
	}
	return ociarchive.ReplaceFile(path, func(w io.Writer) error { return tarball.Write(tag, img, w) })
}

// WriteOCI writes img as an OCI image layout in a tar archive naming it
// ref (package ociarchive). Unlike Write's Docker archive, from which
// containerd composes a manifest of its own, the manifest digest
// containerd records is the image's own, the one a registry push gives.
func WriteOCI(img v1.Image, ref, path string) error {
	tag, err := ParseRef(ref)
	if err != nil {
		return err
	}
	return ociarchive.WriteFile(path, img, tag.Name())
}

// ReadOCI extracts an archive WriteOCI wrote into dir (empty or new) and
// returns its images by the names its index gives them. The images read
// their blobs from dir, so dir must outlive them.
func ReadOCI(archive, dir string) (map[string]v1.Image, error) {
	if err := extractTar(archive, dir); err != nil {
		return nil, fmt.Errorf("read %s: %w", archive, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", archive, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", archive, err)
	}
	imgs := map[string]v1.Image{}
	for _, d := range im.Manifests {
		ref := d.Annotations["io.containerd.image.name"]
		if ref == "" {
			return nil, fmt.Errorf("read %s: manifest %s has no image name", archive, d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("read %s: %s: %w", archive, ref, err)
		}
		imgs[ref] = img
	}
	return imgs, nil
}

// extractTar writes an archive's directories and regular files below dir,
// refusing any name that would leave it.
func extractTar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) {
			return fmt.Errorf("entry %q: not a path below the archive's root", hdr.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			err = writeFile(dst, tr)
		default:
			err = fmt.Errorf("entry %q: type %q is neither a file nor a directory", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(dst string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read loads the image tagged ref from an archive Write wrote.
func Read(path, ref string) (v1.Image, error) {
	tag, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return img, nil
}

// ParseRef parses an image name, which must give its registry and tag:
// containerd records an imported name as written, while kubelet looks an
// image up by its normalized name (plexus:1 is docker.io/library/plexus:1),
// so only a full name is found by both.
func ParseRef(ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image name %q (want registry/repository:tag): %w", ref, err)
	}
	return tag, nil
}

// entry is one file or directory of the layer.
type entry struct {
	dst  string
	mode fs.FileMode
	dir  bool
	data []byte
}

// layerTarball reads files and returns the layer as an uncompressed tar:
// their parent directories, then every entry sorted by path, each owned by
// 0:0 with mtime created.
func layerTarball(files []File, created time.Time) ([]byte, error) {
	entries := map[string]entry{}
	for _, f := range files {
		dst, err := cleanDst(f.Dst)
		if err != nil {
			return nil, err
		}
		if _, dup := entries[dst]; dup {
			return nil, fmt.Errorf("image file %s: given twice", dst)
		}
		if f.Mode&^fs.ModePerm != 0 {
			return nil, fmt.Errorf("image file %s: mode %v has more than permission bits", dst, f.Mode)
		}
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", dst, err)
		}
		entries[dst] = entry{dst: dst, mode: f.Mode, data: data}
	}
	for _, f := range files {
		for d := path.Dir(f.Dst); d != "/"; d = path.Dir(d) {
			if e, ok := entries[d]; ok && !e.dir {
				return nil, fmt.Errorf("image file %s: its parent %s is also a file", f.Dst, d)
			}
			entries[d] = entry{dst: d, mode: dirMode, dir: true}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	// Sorted by path, so parents come before their children.
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := entries[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    int64(e.mode),
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("image file %s: %w", p, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image file %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

// cleanDst checks that dst is an absolute, clean path below the root.
func cleanDst(dst string) (string, error) {
	if !path.IsAbs(dst) || path.Clean(dst) != dst || dst == "/" {
		return "", fmt.Errorf("image file %q: not a clean absolute path below /", dst)
	}
	return dst, nil
}

// CreatedFromEnv is the build time: SOURCE_DATE_EPOCH (seconds) when set,
// else the Unix epoch, so builds do not depend on the clock.
func CreatedFromEnv(getenv func(string) string) (time.Time, error) {
	s := getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}
