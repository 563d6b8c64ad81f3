package main

import (
	"context"
	"io"

	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/extensions/pack"
)

// runExt is "plexusctl ext": inspect, run and warm extension modules, and
// pack one into an OCI image.
func runExt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "pack" {
		return pack.PackCommand(ctx, args[1:], stdout, stderr)
	}
	return extensions.ExtCommand(ctx, args, stdout, stderr)
}
