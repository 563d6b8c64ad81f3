package pack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/pflag"

	"github.com/plexus-cni/plexus/extensions/pack/ociarchive"
)

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
