package pack

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/plexus-cni/plexus/core/codes"
)

// PackUsage is "plexusctl ext pack"'s usage.
const PackUsage = `usage: plexusctl ext pack --wasm MODULE.wasm [--tag REF] (-o IMAGE.tar | --push) [--copier FILE]
checks the module as plexusd would, then packs it into an OCI image
  --wasm FILE     the module (a wasip1 reactor with its plexus.manifest section)
  --tag REF       the image's name (default localhost/plexus-extensions/NAME:VERSION; required with --push)
  -o FILE         write an OCI archive (ctr -n k8s.io images import FILE, docker load -i FILE)
  --push          push to the registry REF names, with docker login's credentials
  --copier FILE   the static copier the image carries (default: plexus-ext-copy beside plexusctl)
the image's timestamps are $SOURCE_DATE_EPOCH, else the Unix epoch
`

// packArgs are the parsed flags.
type packArgs struct {
	wasm, tag, out, copier string
	push                   bool
}

// PackCommand is "plexusctl ext pack"; it returns the exit code.
func PackCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parsePack(args)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl ext pack: %v\n%s", err, PackUsage)
		return codes.ExitUsage
	}
	created, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
	if err == nil {
		err = pack(ctx, a, created, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl ext pack: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}

func parsePack(args []string) (packArgs, error) {
	var a packArgs
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.wasm, "wasm", "", "")
	fs.StringVar(&a.tag, "tag", "", "")
	fs.StringVar(&a.out, "o", "", "")
	fs.StringVar(&a.copier, "copier", "", "")
	fs.BoolVar(&a.push, "push", false, "")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	switch {
	case fs.NArg() > 0:
		return a, fmt.Errorf("unexpected arguments %v", fs.Args())
	case a.wasm == "":
		return a, errors.New("--wasm is required")
	case (a.out == "") == !a.push:
		return a, errors.New("give -o FILE or --push, one of them")
	case a.push && a.tag == "":
		return a, errors.New("--push needs --tag, the registry's name for the image")
	}
	if a.copier == "" {
		exe, err := os.Executable()
		if err != nil {
			return a, fmt.Errorf("finding the copier beside plexusctl: %w (give --copier)", err)
		}
		a.copier = filepath.Join(filepath.Dir(exe), "plexus-ext-copy")
	}
	return a, nil
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

func pack(ctx context.Context, a packArgs, created time.Time, stdout io.Writer) error {
	img, info, err := Build(ctx, Options{Wasm: a.wasm, Copier: a.copier, Created: created})
	if err != nil {
		return err
	}
	info.Ref = a.tag
	if info.Ref == "" {
		info.Ref = "localhost/plexus-extensions/" + info.Name + ":" + info.Version
	}
	if _, err := ParseRef(info.Ref); err != nil {
		return err
	}
	if a.push {
		err = Push(ctx, img, info.Ref)
	} else {
		err = WriteArchive(img, info.Ref, a.out)
	}
	if err != nil {
		return err
	}
	return newJSONEncoder(stdout).Encode(info)
}
