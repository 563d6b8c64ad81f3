// Command plexus-shim is the plugin binary of thick mode: it forwards every
// CNI call to plexusd and relays the answer. It links only the shim, so it
// starts far faster than the full plexus plugin, which it runs only for a
// DEL while plexusd is down (to tear down from the attachment record).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/cmd/internal/shim"
	"github.com/plexus-cni/plexus/core/config"
)

func main() {
	call := func(command string) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error { return forward(a, command) }
	}
	skel.PluginMainFuncs(
		skel.CNIFuncs{Add: call("ADD"), Del: call("DEL"), Check: call("CHECK"), GC: call("GC"), Status: call("STATUS")},
		version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"),
		"plexus-shim: forwards CNI calls to plexusd",
	)
}

// forward reads only the socket and wait of the config: plexusd checks the
// rest. No signal handling: a runtime that gives up kills the shim, and the
// call it forwarded finishes or rolls back in plexusd either way.
func forward(a *skel.CmdArgs, command string) error {
	ctx := context.Background()
	conf, err := config.ParseDaemon(a.StdinData)
	if err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if conf.Socket == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, `plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode`, "")
	}
	return shim.Forward(ctx, conf, a, command, os.Stdout, func() error { return fullPluginDEL(ctx, a) })
}

// fullPluginDEL runs the full plexus plugin, installed beside this one, for
// a DEL without plexusd; its output is the answer, its failure our exit.
func fullPluginDEL(ctx context.Context, a *skel.CmdArgs) error {
	self, err := os.Executable()
	if err != nil {
		return types.NewError(types.ErrInternal, "finding the plexus plugin: "+err.Error(), "")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(self), "plexus"))
	cmd.Env, cmd.Stdin, cmd.Stderr = os.Environ(), bytes.NewReader(a.StdinData), os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	err = cmd.Run()
	os.Stdout.Write(out.Bytes())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode()) // the plugin printed its own error
	}
	if err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("running the plexus plugin for DEL without plexusd: %v", err), "")
	}
	return nil
}
