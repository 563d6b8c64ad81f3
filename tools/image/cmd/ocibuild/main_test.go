package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/plexus-cni/plexus/tools/image/ociimage"
)

func noEnv(string) string { return "" }

// digestLine is the digest ocibuild printed.
func digestLine(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(out)
	if len(f) < 2 || !strings.HasPrefix(f[1], "sha256:") {
		t.Fatalf("output %q names no digest", out)
	}
	return f[1]
}

func TestFlagsBuildTheImageTheyDescribe(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "x")
	if err := os.WriteFile(src, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.tar")
	var stdout bytes.Buffer
	err := run([]string{
		"-name", "example.org/x:1", "-out", out, "-arch", "arm64",
		"-file", src + ":/usr/bin/x:0750",
		"-entrypoint", `["/usr/bin/x"]`, "-cmd", `["serve","--port=1"]`,
		"-env", "A=1", "-label", "k=v=w", "-user", "10:10", "-workdir", "/srv",
	}, noEnv, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := ociimage.ReadOCI(out, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img := imgs["example.org/x:1"]
	if img == nil {
		t.Fatalf("archive holds %v", imgs)
	}
	d, _ := img.Digest()
	if got := digestLine(t, stdout.String()); got != d.String() {
		t.Errorf("printed %s, archive holds %s", got, d)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != "/usr/bin/x" || strings.Join(c.Cmd, " ") != "serve --port=1" ||
		strings.Join(c.Env, " ") != "A=1" || c.Labels["k"] != "v=w" || c.User != "10:10" ||
		c.WorkingDir != "/srv" || cf.Architecture != "arm64" {
		t.Errorf("config %+v arch %s: not what the flags say", c, cf.Architecture)
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no name", []string{"-out", "x.tar", "-preset", "pause"}, "-name is required"},
		{"a name without registry", []string{"-name", "plexus:1", "-out", "x", "-preset", "pause"}, `"plexus:1" (want registry/repository:tag)`},
		{"no output", []string{"-name", "example.org/b:1", "-preset", "pause"}, "-out, -push"},
		{"an unknown preset", []string{"-name", "example.org/b:1", "-out", "x", "-preset", "nginx"}, `-preset "nginx"`},
		{"a preset with files", []string{"-name", "example.org/b:1", "-out", "x", "-preset", "pause", "-file", "a:/a:0755"}, "takes no -file"},
		{"a file without a mode", []string{"-name", "example.org/b:1", "-out", "x", "-file", "a:/a"}, `-file "a:/a"`},
		{"a mode not octal", []string{"-name", "example.org/b:1", "-out", "x", "-file", "a:/a:0999"}, `mode "0999"`},
		{"an entrypoint not JSON", []string{"-name", "example.org/b:1", "-out", "x", "-entrypoint", "/x"}, "JSON array"},
		{"an env without =", []string{"-name", "example.org/b:1", "-out", "x", "-env", "A"}, `-env "A"`},
		{"a format", []string{"-name", "example.org/b:1", "-out", "x", "-format", "zip"}, `-format "zip"`},
		{"a missing binary", []string{"-name", "example.org/b:1", "-out", "x", "-preset", "pause", "-bin", "/nonexistent"}, "/nonexistent/pause"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			err := run(tc.args, noEnv, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if _, statErr := os.Stat("x"); statErr == nil {
				t.Error("wrote an archive anyway")
			}
		})
	}
}

// TestPushSendsTheImageToARegistry pushes to go-containerregistry's
// in-process registry (no real registry is reachable here) and reads the
// image back by its name.
func TestPushSendsTheImageToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "pause"), []byte("pause"), 0o755); err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/plexus/pause:3.10"
	var stdout bytes.Buffer
	if err := run([]string{"-preset", "pause", "-bin", bin, "-name", ref, "-push"}, noEnv, &stdout); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(tag)
	if err != nil {
		t.Fatalf("the registry has no %s: %v", ref, err)
	}
	if got := digestLine(t, stdout.String()); desc.Digest.String() != got {
		t.Errorf("registry holds %s, ocibuild built %s", desc.Digest, got)
	}
}
