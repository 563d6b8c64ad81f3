package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testSpec is a small image from files written under dir.
func testSpec(t *testing.T, dir string) Spec {
	t.Helper()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Spec{
		Files: []File{
			{Src: write("tool", "#tool"), Dst: "/opt/x/bin/tool", Mode: 0o755},
			{Src: write("conf", "conf"), Dst: "/etc/x.conf", Mode: 0o640},
		},
		Entrypoint: []string{"/opt/x/bin/tool"},
		Cmd:        []string{"run"},
		Env:        []string{"PATH=/opt/x/bin"},
		Labels:     map[string]string{"org.opencontainers.image.version": "v1"},
		User:       "0:0",
		WorkingDir: "/",
		Arch:       "amd64",
		Created:    time.Unix(1700000000, 0),
	}
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSameInputsGiveTheSameDigestAndArchive(t *testing.T) {
	spec := testSpec(t, t.TempDir())
	var digests []v1.Hash
	var archives [][]byte
	for i := range 2 {
		img, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, digest(t, img))
		out := filepath.Join(t.TempDir(), "img.tar")
		if err := WriteOCI(img, "example.org/x:1", out); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
		// The second build's files are touched: only contents count.
		if i == 0 {
			now := time.Now()
			for _, f := range spec.Files {
				if err := os.Chtimes(f.Src, now, now); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("digests %s and %s of the same inputs differ", digests[0], digests[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("archives of the same inputs differ")
	}
}

func TestAnyInputChangesTheDigest(t *testing.T) {
	dir := t.TempDir()
	base := testSpec(t, dir)
	img, err := Build(base)
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, img)
	for _, tc := range []struct {
		name   string
		change func(*Spec)
	}{
		{"created", func(s *Spec) { s.Created = s.Created.Add(time.Second) }},
		{"mode", func(s *Spec) { s.Files[1].Mode = 0o644 }},
		{"path", func(s *Spec) { s.Files[1].Dst = "/etc/y.conf" }},
		{"label", func(s *Spec) { s.Labels = map[string]string{"org.opencontainers.image.version": "v2"} }},
		{"content", func(s *Spec) {
			p := filepath.Join(t.TempDir(), "conf")
			if err := os.WriteFile(p, []byte("conf2"), 0o600); err != nil {
				t.Fatal(err)
			}
			s.Files[1].Src = p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, t.TempDir())
			tc.change(&spec)
			img, err := Build(spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := digest(t, img); got == want {
				t.Errorf("digest %s unchanged", got)
			}
		})
	}
}

// layerEntry is what a test checks of one layer entry.
type layerEntry struct {
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  int64
	Data     string
}

func layerEntries(t *testing.T, img v1.Image) map[string]layerEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]layerEntry{}
	var order []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got[hdr.Name] = layerEntry{hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime.Unix(), string(data)}
		order = append(order, hdr.Name)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("layer entries not sorted: %q before %q", order[i-1], order[i])
		}
	}
	return got
}

func TestLayerHoldsTheFilesWithTheirModesAndParents(t *testing.T) {
	spec := testSpec(t, t.TempDir())
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	mt := spec.Created.Unix()
	dir := layerEntry{tar.TypeDir, 0o755, 0, 0, mt, ""}
	want := map[string]layerEntry{
		"etc/":           dir,
		"etc/x.conf":     {tar.TypeReg, 0o640, 0, 0, mt, "conf"},
		"opt/":           dir,
		"opt/x/":         dir,
		"opt/x/bin/":     dir,
		"opt/x/bin/tool": {tar.TypeReg, 0o755, 0, 0, mt, "#tool"},
	}
	if got := layerEntries(t, img); !reflect.DeepEqual(got, want) {
		t.Errorf("layer:\n got %+v\nwant %+v", got, want)
	}
}

func TestConfigHoldsTheSpec(t *testing.T) {
	spec := testSpec(t, t.TempDir())
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := v1.Config{
		Entrypoint: spec.Entrypoint, Cmd: spec.Cmd, Env: spec.Env, Labels: spec.Labels,
		User: spec.User, WorkingDir: spec.WorkingDir,
	}
	if !reflect.DeepEqual(cf.Config, want) {
		t.Errorf("config %+v, want %+v", cf.Config, want)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(spec.Created) {
		t.Errorf("os %q arch %q created %v, want linux amd64 %v", cf.OS, cf.Architecture, cf.Created.Time, spec.Created)
	}
}

func TestBuildRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		want   []string // substrings of the error
	}{
		{"a missing input file", func(s *Spec) { s.Files[0].Src = "/nonexistent/plexusd" },
			[]string{"/opt/x/bin/tool", "/nonexistent/plexusd", "no such file"}},
		{"a relative destination", func(s *Spec) { s.Files[0].Dst = "opt/tool" }, []string{`"opt/tool"`, "absolute"}},
		{"an unclean destination", func(s *Spec) { s.Files[0].Dst = "/opt/../tool" }, []string{`"/opt/../tool"`}},
		{"the root as destination", func(s *Spec) { s.Files[0].Dst = "/" }, []string{`"/"`}},
		{"a destination given twice", func(s *Spec) { s.Files[1].Dst = s.Files[0].Dst }, []string{"/opt/x/bin/tool", "twice"}},
		{"a file where a directory goes", func(s *Spec) { s.Files[1].Dst = "/opt/x" }, []string{"/opt/x/bin/tool", "/opt/x is also a file"}},
		{"a mode beyond permissions", func(s *Spec) { s.Files[0].Mode |= fs.ModeSetuid }, []string{"/opt/x/bin/tool", "permission bits"}},
		{"no architecture", func(s *Spec) { s.Arch = "" }, []string{"architecture"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, t.TempDir())
			tc.change(&spec)
			_, err := Build(spec)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestMissingInputIsNotExist(t *testing.T) {
	spec := testSpec(t, t.TempDir())
	spec.Files[0].Src = filepath.Join(t.TempDir(), "gone")
	if _, err := Build(spec); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v, want one wrapping fs.ErrNotExist", err)
	}
}

func TestArchivesReadBackUnderTheirName(t *testing.T) {
	img, err := Build(testSpec(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, img)
	const ref = "localhost/plexus/x:1.2"

	t.Run("oci", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "oci.tar")
		if err := WriteOCI(img, ref, out); err != nil {
			t.Fatal(err)
		}
		imgs, err := ReadOCI(out, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if len(imgs) != 1 || imgs[ref] == nil {
			t.Fatalf("images %v, want only %s", imgs, ref)
		}
		if got := digest(t, imgs[ref]); got != want {
			t.Errorf("digest %s, want %s", got, want)
		}
	})
	t.Run("docker", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "docker.tar")
		if err := Write(img, ref, out); err != nil {
			t.Fatal(err)
		}
		back, err := Read(out, ref)
		if err != nil {
			t.Fatal(err)
		}
		// A Docker archive keeps the config, not the manifest: compare
		// the configs' digests.
		got, err := back.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		wantConfig, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if got != wantConfig {
			t.Errorf("config digest %s, want %s", got, wantConfig)
		}
	})
	t.Run("a bad name writes nothing", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "bad.tar")
		err := WriteOCI(img, "Not A Name", out)
		if err == nil || !strings.Contains(err.Error(), `"Not A Name"`) {
			t.Errorf("error %v, want one naming the image name", err)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a failed write (%v)", out, err)
		}
	})
}

func TestCreatedFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    time.Time
		wantErr bool
	}{
		{"", time.Unix(0, 0), false},
		{"1700000000", time.Unix(1700000000, 0), false},
		{"yesterday", time.Time{}, true},
	} {
		got, err := CreatedFromEnv(func(string) string { return tc.env })
		if (err != nil) != tc.wantErr || !got.Equal(tc.want) {
			t.Errorf("SOURCE_DATE_EPOCH=%q: %v, %v; want %v (error %v)", tc.env, got, err, tc.want, tc.wantErr)
		}
	}
}
