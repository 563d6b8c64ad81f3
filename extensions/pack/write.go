package pack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/plexus-cni/plexus/extensions/pack/ociarchive"
)

// WriteArchive writes img to path as an OCI layout archive naming it ref,
// from which `ctr -n k8s.io images import` names the image and records
// the image's own digest, the one a push gives.
func WriteArchive(img v1.Image, ref, path string) error {
	r, err := ParseRef(ref)
	if err != nil {
		return err
	}
	return ociarchive.WriteFile(path, img, r.Name())
}

// Push pushes img to the registry ref names, with the credentials docker
// login (or a credential helper it names) keeps; opts add to or override
// those options.
func Push(ctx context.Context, img v1.Image, ref string, opts ...remote.Option) error {
	r, err := ParseRef(ref)
	if err != nil {
		return err
	}
	all := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.Write(r, img, all...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc
}
