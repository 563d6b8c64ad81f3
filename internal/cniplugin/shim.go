package cniplugin

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/internal/daemon/wire"
	"github.com/plexus-cni/plexus/internal/shim"
)

// forward is the full plugin acting as the shim: without plexusd, its DEL
// tears down from the record in this process (a DEL source never touches
// the API).
func (o Options) forward(ctx context.Context, conf *config.Config, a *skel.CmdArgs, cmd Command) error {
	call := &wire.Call{Env: shim.CNIEnv(os.Environ()), Stdin: a.StdinData}
	reply, err := shim.Forward(conf.Daemon(), call, func() error {
		return o.Run(ctx, conf, CmdDel, a, os.Stdout)
	})
	var se *shim.Error
	if errors.As(err, &se) {
		return types.NewError(se.Code, se.Msg, "")
	}
	if err != nil || reply == nil {
		return err
	}
	return relay(reply)
}

// relay writes a success as it came, and turns a failure back into the
// CNI error skel prints, so the runtime sees plexusd's code and message.
func relay(r *wire.Reply) error {
	if !r.Failed {
		_, err := os.Stdout.Write(r.Stdout)
		return err
	}
	var e types.Error
	if err := json.Unmarshal(r.Stdout, &e); err != nil || e.Code == 0 {
		return types.NewError(types.ErrInternal, "plexusd returned an unreadable error: "+string(r.Stdout), "")
	}
	return &e
}
