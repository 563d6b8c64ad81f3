// Package images holds what plexus's two images contain: the plexus image
// the DaemonSets in deploy/ run, and the pause image the test node's
// sandboxes run. deploy/Dockerfile describes the plexus image for engines;
// dockerfile_test.go keeps the two equal.
package images

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
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

// PlexusPolicyDir is where the image holds the s7.4 rule library
// (library/, its .rego modules without their tests) and the baseline
// policy's data file (baseline.yaml), from the repository's policies/.
// plexusd's config in deploy/ names them; the thin installer copies them
// to the host for the plugin (`plexusctl install --policy-src-dir`).
const PlexusPolicyDir = "/opt/plexus/policy"

// PolicyFiles are the files of the repository's policies directory the
// image holds, relative to it, sorted: library/*.rego but its tests, and
// baseline.yaml.
func PolicyFiles(policiesDir string) ([]string, error) {
	rego, err := filepath.Glob(filepath.Join(policiesDir, "library", "*.rego"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range rego {
		if !strings.HasSuffix(f, "_test.rego") {
			out = append(out, "library/"+filepath.Base(f))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no .rego modules (want the repository's policies directory)", filepath.Join(policiesDir, "library"))
	}
	out = append(out, "baseline.yaml")
	sort.Strings(out)
	return out, nil
}

// Source is the repository the images are built from (label
// org.opencontainers.image.source).
const Source = "https://github.com/plexus-cni/plexus"

// Plexus is the plexus image, from the binaries in binDir and the policy
// files of policiesDir (the repository's policies/).
func Plexus(binDir, policiesDir, version, arch string, created time.Time) (ociimage.Spec, error) {
	policy, err := PolicyFiles(policiesDir)
	if err != nil {
		return ociimage.Spec{}, err
	}
	files := make([]ociimage.File, 0, len(PlexusBinaries)+len(policy))
	for _, b := range PlexusBinaries {
		files = append(files, ociimage.File{
			Src:  filepath.Join(binDir, b),
			Dst:  PlexusBinDir + "/" + b,
			Mode: 0o755,
		})
	}
	for _, p := range policy {
		files = append(files, ociimage.File{
			Src:  filepath.Join(policiesDir, filepath.FromSlash(p)),
			Dst:  PlexusPolicyDir + "/" + p,
			Mode: 0o644,
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
	}, nil
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
