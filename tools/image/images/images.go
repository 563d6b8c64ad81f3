// Package images holds what plexus's two images contain: the plexus image
// the DaemonSets in deploy/ run, and the pause image the test node's
// sandboxes run. deploy/Dockerfile describes the plexus image for engines;
// dockerfile_test.go keeps the two equal.
package images

import (
	"path/filepath"
	"time"

	"github.com/plexus-cni/plexus/tools/image/ociimage"
)

// PlexusBinDir is where the plexus binaries live in the image; deploy/'s
// containers run them from here and `plexusctl install --src-bin-dir`
// copies the plugins to the host from here.
const PlexusBinDir = "/opt/plexus/bin"

// PlexusBinaries are the image's files: static binaries (CGO_ENABLED=0), so
// the image needs no libc, and no shell (nothing in deploy/ runs one).
var PlexusBinaries = []string{"plexus", "plexus-shim", "plexusctl", "plexusd"}

// Source is the repository the images are built from (label
// org.opencontainers.image.source).
const Source = "https://github.com/plexus-cni/plexus"

// Plexus is the plexus image, from the binaries in binDir.
func Plexus(binDir, version, arch string, created time.Time) ociimage.Spec {
	files := make([]ociimage.File, 0, len(PlexusBinaries))
	for _, b := range PlexusBinaries {
		files = append(files, ociimage.File{
			Src:  filepath.Join(binDir, b),
			Dst:  PlexusBinDir + "/" + b,
			Mode: 0o755,
		})
	}
	return ociimage.Spec{
		Files: files,
		// deploy/ sets command and args for each container; the entrypoint
		// only matters to someone running the image by hand.
		Entrypoint: []string{PlexusBinDir + "/plexusctl"},
		Env:        []string{"PATH=" + PlexusBinDir},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "plexus",
			"org.opencontainers.image.description": "plexus CNI meta-plugin: plugin, thick-mode shim, node daemon and installer",
			"org.opencontainers.image.source":      Source,
			"org.opencontainers.image.version":     version,
		},
		// Root, as deploy/ runs it (runAsUser: 0): the installer writes
		// root-owned host directories and plexusd runs CNI plugins.
		User:       "0:0",
		WorkingDir: "/",
		Arch:       arch,
		Created:    created,
	}
}

// PauseBinary is the pause image's one file.
const PauseBinary = "/pause"

// Pause is the pause image, from binDir/pause (tools/image/cmd/pause). It
// runs as 65535:65535 as Kubernetes's own pause image does: a sandbox's
// holder needs no privilege.
func Pause(binDir, arch string, created time.Time) ociimage.Spec {
	return ociimage.Spec{
		Files:      []ociimage.File{{Src: filepath.Join(binDir, "pause"), Dst: PauseBinary, Mode: 0o755}},
		Entrypoint: []string{PauseBinary},
		User:       "65535:65535",
		WorkingDir: "/",
		Arch:       arch,
		Created:    created,
	}
}
