package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
)

// Versions are the CNI versions plexus supports.
var Versions = version.PluginSupports(wire.CNIVersions...)

// Funcs are the plugin's commands for skel, each run in this process.
func (o Options) Funcs(ctx context.Context, stdout io.Writer) skel.CNIFuncs {
	command := func(cmd Command) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error { return o.plugin(ctx, cmd, a, stdout) }
	}
	return skel.CNIFuncs{Add: command(CmdAdd), Del: command(CmdDel), Check: command(CmdCheck), GC: command(CmdGC), Status: command(CmdStatus)}
}

// plugin runs one call of the plexus binary.
func (o Options) plugin(ctx context.Context, cmd Command, a *skel.CmdArgs, stdout io.Writer) error {
	conf, err := o.accept(a)
	if err != nil {
		return err
	}
	if err := checkThin(conf); err != nil {
		return err
	}
	return o.Run(ctx, conf, cmd, a, stdout)
}

// checkThin refuses a config of type plexus that names plexusd's socket.
// (A plexus-shim config reaches the plugin for a DEL while plexusd is down.)
func checkThin(conf *config.Config) error {
	if conf.DaemonSocket == "" || conf.Type != "plexus" {
		return nil
	}
	return types.NewError(codes.InvalidNetworkConfig, `plexus config: "daemonSocket" is set but "type" is "plexus", which runs every call itself; `+
		`name "type": "plexus-shim" to forward calls to plexusd`, "")
}

// Handle runs a forwarded call, answering what the plugin would print.
func (o Options) Handle(ctx context.Context, c *daemon.Call) *daemon.Reply {
	cmd, err := ParseCommand(c.Command())
	if err != nil {
		return failed(types.NewError(codes.InvalidEnvironment, err.Error(), ""))
	}
	a := c.CmdArgs()
	conf, err := o.accept(a)
	if err != nil {
		return failed(err)
	}
	if o.Own != nil {
		conf.BinDir, conf.CacheDir, conf.ConfDir = o.Own.BinDir, o.Own.CacheDir, o.Own.ConfDir
	}
	var out bytes.Buffer
	if err := o.Run(ctx, conf, cmd, a, &out); err != nil {
		return failed(err)
	}
	return &daemon.Reply{Stdout: out.Bytes()}
}

// accept parses plexus's config, once per call. The pipeline refuses an
// ADD or a DEL in plexus's own network namespace before anything runs.
func (o Options) accept(a *skel.CmdArgs) (*config.Config, error) {
	parse := o.parse
	if parse == nil {
		parse = config.Parse
	}
	conf, err := parse(a.StdinData)
	if err != nil {
		return nil, types.NewError(codes.InvalidNetworkConfig, err.Error(), "")
	}
	return conf, nil
}

// failed is the CNI error, indented as skel prints it.
func failed(err error) *daemon.Reply {
	var te *types.Error
	if !errors.As(err, &te) {
		te = types.NewError(codes.Internal, err.Error(), "")
	}
	b, _ := json.MarshalIndent(te, "", "    ")
	return &daemon.Reply{Stdout: b, Failed: true}
}
