package main

import (
	"context"
	"io"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/migrate"
)

// runMigrate is "plexusctl migrate": a Multus config to plexus's.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return migrate.Command(ctx, args, stdout, stderr)
}
