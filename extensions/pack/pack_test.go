package pack

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/pflag"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/extensions/copier"
	"github.com/plexus-cni/plexus/extensions/pack/ociarchive"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

var copierPath string

// TestMain builds the copier as make does: static.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pack-")
	if err != nil {
		panic(err)
	}
	copierPath = filepath.Join(dir, "plexus-ext-copy")
	cmd := exec.Command("go", "build", "-trimpath", "-o", copierPath, "../../cmd/plexus-ext-copy")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the copier: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// module is a hand-assembled reactor exporting "prepare" and a memory,
// with the manifest (none when ""); functions, when set, replaces its
// function section.
func module(manifest string, functions []byte) []byte {
	vec := func(n int, items []byte) []byte { return append(wasmfmt.AppendU32(nil, uint32(n)), items...) }
	b := []byte(wasmfmt.Header)
	b = wasmfmt.AppendSection(b, 1, vec(1, []byte{0x60, 0x01, 0x7f, 0x01, 0x7f}))
	if functions == nil {
		functions = vec(1, []byte{0x00})
	}
	b = wasmfmt.AppendSection(b, 3, functions)
	b = wasmfmt.AppendSection(b, 5, vec(1, []byte{0x00, 0x01}))
	exps := append(wasmfmt.AppendName(nil, "memory"), wasmfmt.KindMemory, 0x00)
	exps = append(wasmfmt.AppendName(exps, "prepare"), wasmfmt.KindFunc, 0x00)
	b = wasmfmt.AppendSection(b, 7, vec(2, exps))
	fn := []byte{0x00, 0x41, 0x00, 0x0b} // no locals; i32.const 0; end
	b = wasmfmt.AppendSection(b, 10, vec(1, append(wasmfmt.AppendU32(nil, uint32(len(fn))), fn...)))
	if manifest != "" {
		b = wasmfmt.AppendCustomSection(b, abi.ManifestSection, []byte(manifest))
	}
	return b
}

const goodManifest = `{"abi":1,"name":"vendor","version":"2.1.0","prefixes":["com.vendor.","net.vendor."],"hooks":["prepare"]}`

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad input is refused with an error naming what is wrong, and nothing is
// built.
func TestBuildRefuses(t *testing.T) {
	huge := wasmfmt.AppendU32(nil, 1<<32-1)
	cases := []struct {
		name   string
		wasm   func(t *testing.T) string
		copier func(t *testing.T) string
		want   string
	}{
		{"no module file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.wasm") }, nil, "no such file"},
		{"not wasm", func(t *testing.T) string { return writeFile(t, "m.wasm", []byte("#!/bin/sh\n")) }, nil, "not a wasm binary"},
		{"no manifest", func(t *testing.T) string { return writeFile(t, "m.wasm", module("", nil)) }, nil, `no "plexus.manifest" custom section`},
		{"ABI version", func(t *testing.T) string {
			return writeFile(t, "m.wasm", module(strings.Replace(goodManifest, `"abi":1`, `"abi":2`, 1), nil))
		}, nil, "ABI version 2 is not supported (this host speaks 1)"},
		{"bad prefix", func(t *testing.T) string {
			return writeFile(t, "m.wasm", module(strings.Replace(goodManifest, `"com.vendor."`, `"vendor"`, 1), nil))
		}, nil, `prefix "vendor" is not reverse domain notation`},
		{"over the limits", func(t *testing.T) string { return writeFile(t, "m.wasm", module(goodManifest, huge)) }, nil,
			"4294967295 functions claimed"},
		{"no copier", nil, func(t *testing.T) string { return filepath.Join(t.TempDir(), "copy") }, "copier: open"},
		{"copier not ELF", nil, func(t *testing.T) string { return writeFile(t, "copy", []byte("#!/bin/sh\ncp\n")) }, "is not a Linux executable"},
		{"copier dynamic", nil, func(t *testing.T) string { return "/bin/sh" }, "dynamically linked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Wasm: writeFile(t, "m.wasm", module(goodManifest, nil)), Copier: copierPath}
			if c.wasm != nil {
				o.Wasm = c.wasm(t)
			}
			if c.copier != nil {
				o.Copier = c.copier(t)
			}
			img, _, err := Build(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) || img != nil {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// A packed image holds the copier and the module in two layers, carries
// the declaration as labels and annotations, runs the copier, and is the
// same image for the same inputs and time.
func TestBuildImage(t *testing.T) {
	wasm := module(goodManifest, nil)
	o := Options{Wasm: writeFile(t, "m.wasm", wasm), Copier: copierPath, Created: time.Unix(1700000000, 0)}
	img, info, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "vendor" || info.Version != "2.1.0" || info.Arch == "" || info.SHA256 != fmt.Sprintf("%x", sha256.Sum256(wasm)) {
		t.Errorf("info = %+v", info)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		LabelName: "vendor", LabelVersion: "2.1.0", LabelABI: "1", LabelHooks: "prepare",
		LabelPrefixes: "com.vendor.,net.vendor.", LabelSHA256: info.SHA256,
		"org.opencontainers.image.created": "2023-11-14T22:13:20Z",
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if cf.Config.Labels[k] != v || m.Annotations[k] != v {
			t.Errorf("%s: label %q, annotation %q, want %q", k, cf.Config.Labels[k], m.Annotations[k], v)
		}
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "/copy" || cf.OS != "linux" || !cf.Created.Equal(o.Created) {
		t.Errorf("entrypoint %q, os %s, created %v", got, cf.OS, cf.Created)
	}
	layers := layerFiles(t, img)
	wantLayers := [][]string{{"copy 0755"}, {"manifest.json 0444", "module.wasm 0444"}}
	if fmt.Sprint(layers) != fmt.Sprint(wantLayers) {
		t.Errorf("layers %v, want %v", layers, wantLayers)
	}
	again, _, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Created = o.Created.Add(time.Second)
	later, _, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	d3, _ := later.Digest()
	if d1 != d2 || d1 == d3 {
		t.Errorf("digests %s, again %s, a second later %s: want the first two equal, the third not", d1, d2, d3)
	}
	copiers := func(i v1.Image) v1.Hash {
		ls, _ := i.Layers()
		d, _ := ls[0].Digest()
		return d
	}
	if copiers(img) != copiers(later) {
		t.Error("the copier layer differs between modules packed with the same copier")
	}
}

// layerFiles lists each layer's entries as "name mode".
func layerFiles(t *testing.T, img v1.Image) [][]string {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Uid != 0 || h.Gid != 0 {
				t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
			}
			files = append(files, fmt.Sprintf("%s %04o", h.Name, h.Mode))
		}
		rc.Close()
		out = append(out, files)
	}
	return out
}

// The archive is an OCI layout naming the image, with the image's own
// digest; a push stores the same image in a registry.
func TestWriteAndPush(t *testing.T) {
	ctx := context.Background()
	img, _, err := Build(ctx, Options{Wasm: writeFile(t, "m.wasm", module(goodManifest, nil)), Copier: copierPath})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	archive := filepath.Join(t.TempDir(), "vendor.tar")
	const ref = "localhost/plexus-extensions/vendor:2.1.0"
	if err := ociarchive.WriteFile(archive, img, ref); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	untar(t, archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want || im.Manifests[0].Annotations["io.containerd.image.name"] != ref {
		t.Fatalf("index %+v, want %s named %s", im.Manifests, want, ref)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	pushed := strings.TrimPrefix(srv.URL, "http://") + "/vendor/ext:2.1.0"
	r, err := name.ParseReference(pushed, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(ctx, img, r); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("pushed %s, pulled %s", want, d)
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
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The command's flags: one output, a tag for a push.
func TestPackCommandUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-o", "x.tar"}, 64, "--wasm is required"},
		{[]string{"--wasm", "m.wasm"}, 64, "give -o FILE or --push"},
		{[]string{"--wasm", "m.wasm", "-o", "x.tar", "--push"}, 64, "give -o FILE or --push"},
		{[]string{"--wasm", "m.wasm", "--push"}, 64, "--push needs --tag"},
		{[]string{"--wasm", "m.wasm", "-o", "x.tar", "extra"}, 64, "unexpected arguments"},
		{[]string{"--wasm", "m.wasm", "-o", "x.tar", "--tag", "Not/A:Ref:"}, 1, `image reference "Not/A:Ref:"`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string(nil), c.args...)
			for i, a := range args {
				if a == "m.wasm" || a == "x.tar" {
					args[i] = filepath.Join(dir, a)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "m.wasm"), module(goodManifest, nil), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := PackCommand(context.Background(), append(args, "--copier", copierPath), &out, &errb)
			if code != c.code || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), c.code, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "x.tar")); err == nil {
				t.Error("a refused pack wrote its archive")
			}
		})
	}
}

// The archive's contents round-trip: the module in it is the bytes
// checked, under the name the copier copies.
func TestArchiveHoldsTheModule(t *testing.T) {
	wasm := module(goodManifest, nil)
	img, _, err := Build(context.Background(), Options{Wasm: writeFile(t, "m.wasm", wasm), Copier: copierPath})
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := img.Layers()
	rc, err := ls[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the module layer: %v", copier.ModuleFile, err)
		}
		if h.Name == copier.ModuleFile {
			got, _ := io.ReadAll(tr)
			if !bytes.Equal(got, wasm) {
				t.Fatal("the module in the image is not the module checked")
			}
			return
		}
	}
}

// PackCommand is "plexusctl ext pack" from its argument list, outside a
// command tree, for these tests; it returns the exit code.
func PackCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("plexusctl ext pack", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a := AddFlags(fs)
	err := fs.Parse(args)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if err == nil {
		err = a.Check()
	}
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl ext pack: %v\n", err)
		return codes.ExitUsage
	}
	if err := Run(ctx, *a, stdout); err != nil {
		fmt.Fprintf(stderr, "plexusctl ext pack: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}
