// Command plexusctl is the admin and vendor tool of plexus. Its commands
// are cobra commands, each group built in its own file (policy, ext,
// install, migrate, explain); the logic stays in the library packages.
// Copied or linked as kubectl-plexus on PATH, it is also the kubectl
// plugin `kubectl plexus`.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := execute(ctx, newRootCmd(os.Args[0], os.Stdout, os.Stderr), os.Args[1:])
	stop()
	os.Exit(code)
}
