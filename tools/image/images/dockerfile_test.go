package images

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/plexus-cni/plexus/tools/image/ociimage"
)

// TestDockerfileAgreesWithImage checks that deploy/Dockerfile, built by an
// engine, would give the image make image builds: the same files with the
// same modes and owners, entrypoint, cmd, env, labels, user and working
// directory. It checks an image built here from $PLEXUS_BIN, the way
// make image builds it, and bin/plexus-image.tar when make image made one.
func TestDockerfileAgreesWithImage(t *testing.T) {
	bin := plexusBin(t)
	dockerfile := filepath.Join(repoRoot(t), "deploy", "Dockerfile")

	t.Run("built here", func(t *testing.T) {
		const version = "v0.0.0-dockerfile-test"
		spec, err := Plexus(bin, filepath.Join(repoRoot(t), "policies"), version, runtime.GOARCH, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		img, err := ociimage.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "plexus-image.tar")
		if err := ociimage.WriteOCI(img, "localhost/plexus/plexus:test", out); err != nil {
			t.Fatal(err)
		}
		imgs, err := ociimage.ReadOCI(out, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		df, err := readDockerfile(dockerfile, map[string]string{"VERSION": version})
		if err != nil {
			t.Fatal(err)
		}
		checkAgree(t, df, imgs["localhost/plexus/plexus:test"], bin)
	})

	t.Run("make image's archive", func(t *testing.T) {
		archive := filepath.Join(bin, "plexus-image.tar")
		if _, err := os.Stat(archive); err != nil {
			t.Skipf("no %s (make image writes it): %v", archive, err)
		}
		imgs, err := ociimage.ReadOCI(archive, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		name := imageName(t, "IMAGE")
		img := imgs[name]
		if img == nil {
			t.Fatalf("%s holds %v, not %s", archive, slices.Collect(maps.Keys(imgs)), name)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		// make passes git describe's version as the engine would get it
		// with --build-arg VERSION=.
		version := cf.Config.Labels["org.opencontainers.image.version"]
		df, err := readDockerfile(dockerfile, map[string]string{"VERSION": version})
		if err != nil {
			t.Fatal(err)
		}
		checkAgree(t, df, img, bin)
	})
}

func checkAgree(t *testing.T, df *dockerfile, img v1.Image, bin string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	for _, f := range []struct {
		what      string
		got, want any
	}{
		{"entrypoint", c.Entrypoint, df.entrypoint},
		{"cmd", c.Cmd, df.cmd},
		{"env", c.Env, df.env},
		{"labels", c.Labels, df.labels},
		{"user", c.User, df.user},
		{"working directory", c.WorkingDir, df.workdir},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s: image %q, Dockerfile %q", f.what, f.got, f.want)
		}
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}

	got, static := imageFiles(t, img)
	want := map[string]layerFile{}
	for d := range df.dirs {
		want[d] = layerFile{dir: true, mode: 0o755}
	}
	for p, cp := range df.files {
		// The context is the repository's root, and make builds bin/
		// there: bin/x in the Dockerfile is $PLEXUS_BIN/x. The policy
		// files are the repository's own.
		if rel, ok := strings.CutPrefix(cp.src, "policies/"); ok {
			want[p] = layerFile{mode: int64(cp.mode), sha256: fileSHA256(t, filepath.Join(repoRoot(t), "policies", rel))}
			continue
		}
		rel, ok := strings.CutPrefix(cp.src, "bin/")
		if !ok || strings.Contains(rel, "/") {
			t.Errorf("COPY source %s: want a file of bin/ or policies/", cp.src)
			continue
		}
		want[p] = layerFile{mode: int64(cp.mode), sha256: fileSHA256(t, filepath.Join(bin, rel))}
		if !static[p] {
			t.Errorf("%s: not a static executable for %s (the image has no libc)", p, runtime.GOARCH)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if w, ok := want[p]; !ok {
			t.Errorf("%s: in the image (%v), not in the Dockerfile", p, got[p])
		} else if got[p] != w {
			t.Errorf("%s: image %v, Dockerfile %v", p, got[p], w)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[p]; !ok {
			t.Errorf("%s: in the Dockerfile (%v), not in the image", p, want[p])
		}
	}
	// What deploy/ runs is there, and the policy files it loads.
	for _, b := range PlexusBinaries {
		if _, ok := got[path.Join(PlexusBinDir, b)]; !ok {
			t.Errorf("%s/%s: not in the image", PlexusBinDir, b)
		}
	}
	policy, err := PolicyFiles(filepath.Join(repoRoot(t), "policies"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policy {
		if _, ok := got[path.Join(PlexusPolicyDir, p)]; !ok {
			t.Errorf("%s/%s: not in the image", PlexusPolicyDir, p)
		}
	}
	for p := range got {
		if strings.HasSuffix(p, "_test.rego") {
			t.Errorf("%s: a test module in the image", p)
		}
	}
}

// TestDockerignoreSendsWhatTheDockerfileCopies checks that
// deploy/Dockerfile.dockerignore lets every COPY source of deploy/Dockerfile
// into the build context, and keeps the policy library's tests out.
func TestDockerignoreSendsWhatTheDockerfileCopies(t *testing.T) {
	root := repoRoot(t)
	df, err := readDockerfile(filepath.Join(root, "deploy", "Dockerfile"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	for _, cp := range df.files {
		if !sent(patterns, cp.src) {
			t.Errorf("COPY source %s: the dockerignore keeps it out of the context", cp.src)
		}
	}
	tests, err := filepath.Glob(filepath.Join(root, "policies", "library", "*_test.rego"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("policies/library has no tests to check (%v)", err)
	}
	for _, f := range tests {
		if rel := "policies/library/" + filepath.Base(f); sent(patterns, rel) {
			t.Errorf("%s: the dockerignore sends it", rel)
		}
	}
}

// sent reports whether a dockerignore's patterns let the context file rel
// through: the last pattern matching it or one of its parent directories
// decides, "!" re-including.
func sent(patterns []string, rel string) bool {
	in := true
	for _, p := range patterns {
		include := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		for q := rel; q != "."; q = path.Dir(q) {
			if ok, _ := path.Match(p, q); ok {
				in = include
				break
			}
		}
	}
	return in
}
