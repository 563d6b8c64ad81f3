package node

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// PauseImage is the image of every sandbox (containerd's sandbox_image) and
// of the tests' containers. It is imported, never pulled: pods use
// imagePullPolicy Never and there is no registry.
const PauseImage = "localhost/plexus-test/pause:1"

// The OCI media types of an image layout (image-spec v1.1).
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// writeImageArchive packs the static executable exe as the single file
// /pause of an image named name, entrypoint /pause, and writes it as an OCI
// image layout tar (what `ctr images import` reads).
func writeImageArchive(path, exe, name string) error {
	bin, err := os.ReadFile(exe)
	if err != nil {
		return fmt.Errorf("read pause executable: %w", err)
	}
	layer, err := tarOf([]tarEntry{{name: "pause", mode: 0o755, data: bin}})
	if err != nil {
		return err
	}
	layerDesc, layerBlob := blob(mediaLayer, layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/pause"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	if err != nil {
		return err
	}
	configDesc, configBlob := blob(mediaConfig, config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        configDesc,
		"layers":        []descriptor{layerDesc},
	})
	if err != nil {
		return err
	}
	manifestDesc, manifestBlob := blob(mediaManifest, manifest)
	// containerd names an imported image after io.containerd.image.name;
	// the OCI ref name is the tag, for other tools.
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          name,
		"org.opencontainers.image.ref.name": tagOf(name),
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{manifestDesc}})
	if err != nil {
		return err
	}
	archive, err := tarOf([]tarEntry{
		{name: "oci-layout", mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", mode: 0o644, data: index},
		layerBlob, configBlob, manifestBlob,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, archive, 0o644)
}

// tagOf is the tag of an image reference ("latest" when it has none).
func tagOf(ref string) string {
	i := strings.LastIndexAny(ref, ":/")
	if i < 0 || ref[i] == '/' {
		return "latest"
	}
	return ref[i+1:]
}

type tarEntry struct {
	name string
	mode int64
	data []byte
}

// blob is a content-addressed file of the layout and its descriptor.
func blob(mediaType string, data []byte) (descriptor, tarEntry) {
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hexSum, Size: len(data)},
		tarEntry{name: "blobs/sha256/" + hexSum, mode: 0o644, data: data}
}

// tarOf is a tar of regular files with fixed times and owners, so the same
// input gives the same digests.
func tarOf(entries []tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), Typeflag: tar.TypeReg,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
