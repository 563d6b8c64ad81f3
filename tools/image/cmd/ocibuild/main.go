// Command ocibuild builds a container image without a container engine and
// writes it as an image archive for `ctr images import` or `docker load`,
// or pushes it to a registry.
//
//	ocibuild -preset plexus -bin bin -policies policies -version v0.1.0 -name ghcr.io/plexus-cni/plexus:v0.1.0 -out bin/plexus-image.tar
//	ocibuild -preset pause  -bin bin -name localhost/plexus/pause:3.10 -out bin/pause-image.tar
//	ocibuild -file bin/x:/x:0755 -entrypoint '["/x"]' -name example.org/x:1 -out x.tar
//
// Timestamps come from SOURCE_DATE_EPOCH (the Unix epoch when unset), so the
// same inputs give the same image digest.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/plexus-cni/plexus/tools/image/images"
	"github.com/plexus-cni/plexus/tools/image/ociimage"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ocibuild:", err)
		os.Exit(1)
	}
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// jsonList is a flag holding a JSON array of strings (exec form, as a
// Dockerfile's ENTRYPOINT and CMD).
type jsonList []string

func (l *jsonList) String() string { b, _ := json.Marshal([]string(*l)); return string(b) }
func (l *jsonList) Set(v string) error {
	if err := json.Unmarshal([]byte(v), (*[]string)(l)); err != nil {
		return fmt.Errorf("not a JSON array of strings: %w", err)
	}
	return nil
}

type options struct {
	preset, format, bin, policies, version, name, out, arch, user, workdir string
	push                                                                   bool
	files, env, labels                                                     listFlag
	entrypoint, cmd                                                        jsonList
}

func run(args []string, getenv func(string) string, stdout io.Writer) error {
	var o options
	flags := flag.NewFlagSet("ocibuild", flag.ContinueOnError)
	flags.StringVar(&o.preset, "preset", "", `a built-in image: "plexus" or "pause" (else the image is given by -file, -entrypoint, ...)`)
	flags.StringVar(&o.format, "format", "oci", `archive format: "oci" (an OCI image layout) or "docker" (docker save's)`)
	flags.StringVar(&o.bin, "bin", "bin", "directory holding a preset's binaries")
	flags.StringVar(&o.policies, "policies", "policies", "the repository's policies directory, whose rule library and baseline the plexus preset holds")
	flags.StringVar(&o.version, "version", "dev", "version label of the plexus preset")
	flags.StringVar(&o.name, "name", "", "image reference, e.g. localhost/plexus/plexus:v0.1.0 (required)")
	flags.StringVar(&o.out, "out", "", "image archive to write")
	flags.BoolVar(&o.push, "push", false, "push the image to the registry -name names (credentials from the docker config)")
	flags.StringVar(&o.arch, "arch", runtime.GOARCH, "image architecture (GOARCH spelling)")
	flags.Var(&o.files, "file", "SRC:DST:MODE, a host file and its path and octal mode in the image (repeatable)")
	flags.Var(&o.entrypoint, "entrypoint", `entrypoint, a JSON array: '["/bin/x","arg"]'`)
	flags.Var(&o.cmd, "cmd", "command (arguments to the entrypoint), a JSON array")
	flags.Var(&o.env, "env", "KEY=VALUE of the image's environment (repeatable)")
	flags.Var(&o.labels, "label", "KEY=VALUE label (repeatable)")
	flags.StringVar(&o.user, "user", "", "user[:group] the image runs as")
	flags.StringVar(&o.workdir, "workdir", "", "working directory")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flags.Arg(0))
	}
	if o.name == "" {
		return errors.New("-name is required")
	}
	if _, err := ociimage.ParseRef(o.name); err != nil {
		return err
	}
	if o.format != "oci" && o.format != "docker" {
		return fmt.Errorf("-format %q: want oci or docker", o.format)
	}
	if o.out == "" && !o.push {
		return errors.New("give -out, -push or both")
	}
	created, err := ociimage.CreatedFromEnv(getenv)
	if err != nil {
		return err
	}
	spec, err := specFor(o, created)
	if err != nil {
		return err
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if o.out != "" {
		write := ociimage.WriteOCI
		if o.format == "docker" {
			write = ociimage.Write
		}
		if err := write(img, o.name, o.out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s -> %s\n", o.name, digest, o.out)
	}
	if o.push {
		if err := push(img, o.name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s pushed\n", o.name, digest)
	}
	return nil
}

// specFor is the preset's spec, or the one the flags describe.
func specFor(o options, created time.Time) (ociimage.Spec, error) {
	custom := len(o.files) > 0 || len(o.entrypoint) > 0 || len(o.cmd) > 0 || len(o.env) > 0 ||
		len(o.labels) > 0 || o.user != "" || o.workdir != ""
	switch o.preset {
	case "plexus", "pause":
		if custom {
			return ociimage.Spec{}, fmt.Errorf("-preset %s takes no -file, -entrypoint, -cmd, -env, -label, -user or -workdir", o.preset)
		}
		if o.preset == "pause" {
			return images.Pause(o.bin, o.arch, created), nil
		}
		return images.Plexus(o.bin, o.policies, o.version, o.arch, created)
	case "":
	default:
		return ociimage.Spec{}, fmt.Errorf("-preset %q: want plexus or pause", o.preset)
	}
	spec := ociimage.Spec{
		Entrypoint: o.entrypoint, Cmd: o.cmd, Env: o.env,
		User: o.user, WorkingDir: o.workdir, Arch: o.arch, Created: created,
	}
	for _, f := range o.files {
		file, err := parseFile(f)
		if err != nil {
			return ociimage.Spec{}, err
		}
		spec.Files = append(spec.Files, file)
	}
	for _, e := range o.env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return ociimage.Spec{}, fmt.Errorf("-env %q: want KEY=VALUE", e)
		}
	}
	if len(o.labels) > 0 {
		spec.Labels = map[string]string{}
	}
	for _, l := range o.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return ociimage.Spec{}, fmt.Errorf("-label %q: want KEY=VALUE", l)
		}
		spec.Labels[k] = v
	}
	return spec, nil
}

// parseFile parses SRC:DST:MODE.
func parseFile(s string) (ociimage.File, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return ociimage.File{}, fmt.Errorf("-file %q: want SRC:DST:MODE", s)
	}
	mode, err := strconv.ParseUint(parts[2], 8, 32)
	if err != nil || mode > 0o777 {
		return ociimage.File{}, fmt.Errorf("-file %q: mode %q is not octal permission bits", s, parts[2])
	}
	return ociimage.File{Src: parts[0], Dst: parts[1], Mode: fs.FileMode(mode)}, nil
}

// push sends img to the registry ref names, with the credentials docker
// login or crane auth login stored (anonymous when there are none).
func push(img v1.Image, ref string) error {
	tag, err := ociimage.ParseRef(ref)
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
