package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/plexus-cni/plexus/cmd/internal/install"
)

// runInstall is "plexusctl install": the DaemonSet's installer. It runs
// until SIGTERM (the pod stops), then uninstalls if told to.
func runInstall(ctx context.Context, args []string, _, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	return install.Command(ctx, args, os.Getenv, stderr, Version)
}
