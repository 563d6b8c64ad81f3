package main

import (
	"context"
	"io"

	"github.com/plexus-cni/plexus/extensions"
)

// extCommand is "plexusctl ext": inspect, run and warm extension modules.
func extCommand(args []string, stdout, stderr io.Writer) int {
	return extensions.ExtCommand(context.Background(), args, stdout, stderr)
}
