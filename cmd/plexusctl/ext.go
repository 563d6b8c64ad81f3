package main

import (
	"context"
	"io"

	"github.com/plexus-cni/plexus/extensions"
)

// runExt is "plexusctl ext": inspect, run and warm extension modules.
func runExt(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return extensions.ExtCommand(ctx, args, stdout, stderr)
}
