package cniplugin

import (
	"context"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/plexus-cni/plexus/cmd/internal/shim"
	"github.com/plexus-cni/plexus/core/config"
)

// forward is the full plugin acting as the shim: without plexusd, its DEL
// tears down from the record in this process (a DEL source never touches
// the API).
func (o Options) forward(ctx context.Context, conf *config.Config, a *skel.CmdArgs, cmd Command) error {
	target := &config.Daemon{Socket: conf.DaemonSocket, Wait: conf.DaemonWaitDuration}
	return shim.Forward(ctx, target, a, cmd.String(), os.Stdout, func() error {
		return o.Run(ctx, CmdDel, a, os.Stdout)
	})
}
