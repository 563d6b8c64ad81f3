package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/plexus-cni/plexus/cmd/internal/install"
)

// installCommand is "plexusctl install": the DaemonSet's installer. It
// runs until SIGTERM (the pod stops), then uninstalls if told to.
func installCommand(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return install.Command(ctx, args, os.Getenv, stderr)
}
