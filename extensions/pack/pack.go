// Package pack packs an extension module into an OCI image ("plexusctl
// ext pack"), which a node mounts as an image volume into plexusd's pod,
// or copies into an emptyDir with the image's copier in an init container
// (package copier, deploy/extensions).
//
// The image has two layers: the copier (/copy), shared by every image
// packed with the same copier so that it is stored once, and the module
// with its manifest (/module.wasm, /manifest.json). Its labels and
// annotations carry the module's declaration and digest. Builds are
// reproducible: fixed timestamps (Options.Created), owners 0:0, sorted
// entries.
package pack

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/spf13/pflag"

	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/extensions/copier"
	"github.com/plexus-cni/plexus/extensions/pack/ociarchive"
)

// Label and annotation keys the image carries.
const (
	LabelName     = "io.plexus.extension.name"
	LabelVersion  = "io.plexus.extension.version"
	LabelABI      = "io.plexus.extension.abi"
	LabelHooks    = "io.plexus.extension.hooks"
	LabelPrefixes = "io.plexus.extension.prefixes" // comma-separated
	LabelSHA256   = "io.plexus.extension.sha256"   // of module.wasm
)

// maxCopier bounds the copier binary read: a static Go binary of a few MiB.
const maxCopier = 32 << 20

// CommandOptions are "plexusctl ext pack"'s flags.
type CommandOptions struct {
	Wasm, Tag, Out, Copier string
	Push                   bool
}

// AddFlags registers "plexusctl ext pack"'s flags on fs.
func AddFlags(fs *pflag.FlagSet) *CommandOptions {
	a := &CommandOptions{}
	fs.StringVar(&a.Wasm, "wasm", "", "the module (a wasip1 reactor with its plexus.manifest section)")
	fs.StringVar(&a.Tag, "tag", "", "the image's name (default localhost/plexus-extensions/NAME:VERSION; required with --push)")
	fs.StringVarP(&a.Out, "output", "o", "", "write an OCI archive (ctr -n k8s.io images import FILE, docker load -i FILE)")
	fs.BoolVar(&a.Push, "push", false, "push to the registry --tag names, with docker login's credentials")
	fs.StringVar(&a.Copier, "copier", "", "the static copier the image carries (default: plexus-ext-copy beside plexusctl)")
	return a
}

// Check refuses options that cannot pack (a usage error) and finds the
// copier beside plexusctl when none is named.
func (a *CommandOptions) Check() error {
	switch {
	case a.Wasm == "":
		return errors.New("--wasm is required")
	case (a.Out == "") == !a.Push:
		return errors.New("give -o FILE or --push, one of them")
	case a.Push && a.Tag == "":
		return errors.New("--push needs --tag, the registry's name for the image")
	}
	if a.Copier == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the copier beside plexusctl: %w (give --copier)", err)
		}
		a.Copier = filepath.Join(filepath.Dir(exe), "plexus-ext-copy")
	}
	return nil
}

// Run packs as the checked options say and prints the image's
// description. Timestamps are $SOURCE_DATE_EPOCH, else the Unix epoch.
func Run(ctx context.Context, a CommandOptions, stdout io.Writer) error {
	created, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	img, info, err := Build(ctx, Options{Wasm: a.Wasm, Copier: a.Copier, Created: created})
	if err != nil {
		return err
	}
	info.Ref = cmp.Or(a.Tag, "localhost/plexus-extensions/"+info.Name+":"+info.Version)
	ref, err := name.ParseReference(info.Ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", info.Ref, err)
	}
	if a.Push {
		err = Push(ctx, img, ref)
	} else {
		// The archive's index names ref, from which `ctr -n k8s.io images
		// import` names the image, and records the image's own digest,
		// the one a push gives.
		err = ociarchive.WriteFile(a.Out, img, ref.Name())
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(info)
}

// Push pushes img to the registry ref names, with the credentials docker
// login (or a credential helper it names) keeps.
func Push(ctx context.Context, img v1.Image, ref name.Reference) error {
	err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH's time, or the Unix epoch when unset.
func sourceDate(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a count of seconds", v)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Options are what Build packs.
type Options struct {
	Wasm string // the module file
	// Copier is the static Linux copier binary (plexus-ext-copy); its ELF
	// machine sets the image's architecture.
	Copier  string
	Created time.Time
}

// Info describes a packed image.
type Info struct {
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	ABI      int      `json:"abi"`
	Prefixes []string `json:"prefixes"`
	Hooks    []string `json:"hooks"`
	SHA256   string   `json:"moduleSHA256"`
	Arch     string   `json:"arch"`
	Digest   string   `json:"digest,omitempty"` // the image manifest's
	Ref      string   `json:"ref,omitempty"`
	Bytes    int64    `json:"bytes,omitempty"` // compressed layers, config and manifest
}

// Build checks the module as plexusd would (extensions.Check) and packs
// it with the copier. Nothing is written.
func Build(ctx context.Context, o Options) (v1.Image, *Info, error) {
	decl, wasm, err := extensions.Check(ctx, o.Wasm)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Wasm, err)
	}
	copierBin, arch, err := readCopier(o.Copier)
	if err != nil {
		return nil, nil, err
	}
	// The image's manifest.json is the module's own declaration, what
	// `plexusctl ext inspect` shows of it.
	manifest, err := json.MarshalIndent(&decl.Manifest, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	manifest = append(manifest, '\n')
	info := &Info{
		Name: decl.Name, Version: decl.Version, ABI: decl.ABI, Prefixes: decl.Prefixes, Hooks: decl.Hooks,
		SHA256: fmt.Sprintf("%x", sha256.Sum256(wasm)), Arch: arch,
	}
	img, err := image(o.Created, arch, info,
		// The copier's layer has a fixed time: every image packed with the
		// same copier shares it.
		layerSpec{time.Unix(0, 0), []file{{copier.CopierFile, 0o755, copierBin}}},
		layerSpec{o.Created, []file{{copier.ManifestFile, 0o444, manifest}, {copier.ModuleFile, 0o444, wasm}}})
	if err != nil {
		return nil, nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, nil, err
	}
	info.Digest = d.String()
	info.Bytes, err = imageBytes(img)
	return img, info, err
}

// readCopier reads the copier and its architecture, refusing anything but
// a static Linux executable: the image has no libraries.
func readCopier(path string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("copier: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCopier+1))
	if err != nil {
		return nil, "", fmt.Errorf("copier %s: %w", path, err)
	}
	if len(data) > maxCopier {
		return nil, "", fmt.Errorf("copier %s is more than %d bytes", path, maxCopier)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("copier %s is not a Linux executable: %w", path, err)
	}
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil, "", fmt.Errorf("copier %s is not an executable (ELF type %s)", path, ef.Type)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, "", fmt.Errorf("copier %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	arch, ok := map[elf.Machine]string{
		elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64", elf.EM_386: "386", elf.EM_ARM: "arm",
		elf.EM_RISCV: "riscv64", elf.EM_PPC64: "ppc64le", elf.EM_S390: "s390x",
	}[ef.Machine]
	if !ok {
		return nil, "", fmt.Errorf("copier %s: machine %s is not one plexus ships for", path, ef.Machine)
	}
	return data, arch, nil
}

type file struct {
	name string
	mode int64
	data []byte
}

// layerSpec is one layer's files and their time.
type layerSpec struct {
	time  time.Time
	files []file
}

// image is the two-layer image with its config, labels and annotations.
func image(created time.Time, arch string, info *Info, layers ...layerSpec) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, ls := range layers {
		l, err := layer(ls.files, ls.time)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	t := v1.Time{Time: created.UTC()}
	labels := info.labels(created)
	cf.Created, cf.OS, cf.Architecture = t, "linux", arch
	cf.Config = v1.Config{Entrypoint: []string{"/" + copier.CopierFile}, Labels: labels, User: "0"}
	cf.History = []v1.History{
		{Created: t, CreatedBy: "plexusctl ext pack: copier"},
		{Created: t, CreatedBy: "plexusctl ext pack: module " + info.Name + " " + info.Version},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	out, ok := mutate.Annotations(img, labels).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image")
	}
	return out, nil
}

func (i *Info) labels(created time.Time) map[string]string {
	return map[string]string{
		LabelName: i.Name, LabelVersion: i.Version, LabelABI: strconv.Itoa(i.ABI),
		LabelHooks: strings.Join(i.Hooks, ","), LabelPrefixes: strings.Join(i.Prefixes, ","),
		LabelSHA256:                        i.SHA256,
		"org.opencontainers.image.title":   i.Name,
		"org.opencontainers.image.version": i.Version,
		"org.opencontainers.image.created": created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.description": "plexus extension module " + i.Name +
			" (WebAssembly, ABI " + strconv.Itoa(i.ABI) + "): /" + copier.ModuleFile,
	}
}

// layer is one gzip layer of files at the root, in the order given, each
// owned by 0:0 and stamped created.
func layer(files []file, created time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		hdr := &tar.Header{
			Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg,
			ModTime: created.UTC(), Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressedCaching, tarball.WithMediaType(types.OCILayer))
}

// imageBytes is what a registry stores for the image: its compressed
// layers, config and manifest.
func imageBytes(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
