package cniplugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/config"
)

// StagesPlugin is the plexus plugin built with the optional stages: the
// s7.4 policy engine (OPA) and the extension host (wazero). The plexus
// binary links neither, so a call that configures neither does not pay
// their package initialization, about 3.5 ms of every start; an ADD whose
// config has "policy" or "extensions" runs in StagesPlugin instead. The
// installer names StagesPlugin in the config it writes for such a config,
// so that hand-off happens only for configs written by hand.
const StagesPlugin = "plexus-stages"

// needsStages: only an ADD builds the stages (DEL, CHECK, GC and STATUS
// never run a policy or an extension).
func needsStages(cmd Command, conf *config.Config) bool {
	return cmd == CmdAdd && (len(conf.Policy) > 0 || len(conf.Extensions) > 0)
}

// exitStatus is the status of a plugin this one handed the call to, which
// printed its own answer.
type exitStatus int

func (e exitStatus) Error() string { return "the stages plugin failed" }

// handOff runs StagesPlugin from this binary's directory on the same call:
// the same environment, the config on its stdin, its output and exit
// status the answer. A SIGTERM to this process reaches it, and it dies
// with this process.
func (o Options) handOff(ctx context.Context, environ []string, stdin []byte, stdout, stderr io.Writer) error {
	path := o.stagesPath
	if path == "" {
		me, err := os.Executable()
		if err != nil {
			return types.NewError(types.ErrInternal, "finding "+StagesPlugin+" for a config with a policy or extensions: "+err.Error(), "")
		}
		path = filepath.Join(filepath.Dir(me), StagesPlugin)
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ, bytes.NewReader(stdin), stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exitStatus(max(exit.ExitCode(), 1))
	}
	if err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "plexus config has \"policy\" or \"extensions\", which run in "+StagesPlugin+
			"; install it beside plexus (or name it as the config's \"type\"): "+err.Error(), "")
	}
	return nil
}
