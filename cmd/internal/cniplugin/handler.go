package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/daemon"
)

// Handle runs a call forwarded by the shim (plexusd's side): the same
// command with the same environment and config, answered with exactly what
// the plugin would print.
func (o Options) Handle(ctx context.Context, c *daemon.Call) *daemon.Reply {
	cmd, a, err := cmdArgs(c)
	if err == nil {
		var out bytes.Buffer
		if err = o.Run(ctx, cmd, a, &out); err == nil {
			return &daemon.Reply{Stdout: out.Bytes()}
		}
	}
	return &daemon.Reply{Stdout: errorDocument(err), Failed: true}
}

// cmdArgs reads the CNI environment as skel does, requiring what each
// command requires.
func cmdArgs(c *daemon.Call) (Command, *skel.CmdArgs, error) {
	cmd, err := ParseCommand(c.Env["CNI_COMMAND"])
	if err != nil {
		return 0, nil, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	a := &skel.CmdArgs{
		ContainerID: c.Env["CNI_CONTAINERID"],
		Netns:       c.Env["CNI_NETNS"],
		IfName:      c.Env["CNI_IFNAME"],
		Args:        c.Env["CNI_ARGS"],
		Path:        c.Env["CNI_PATH"],
		StdinData:   c.Stdin,
	}
	var missing []string
	need := func(name, v string) {
		if v == "" {
			missing = append(missing, name)
		}
	}
	switch cmd {
	case CmdAdd, CmdCheck:
		need("CNI_CONTAINERID", a.ContainerID)
		need("CNI_NETNS", a.Netns)
		need("CNI_IFNAME", a.IfName)
	case CmdDel:
		need("CNI_CONTAINERID", a.ContainerID)
		need("CNI_IFNAME", a.IfName)
	}
	if len(missing) > 0 {
		return 0, nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("required env variables %v missing", missing), "")
	}
	return cmd, a, nil
}

// errorDocument is the JSON error a plugin prints (CNI spec), indented as
// skel prints it.
func errorDocument(err error) []byte {
	var te *types.Error
	if !errors.As(err, &te) {
		te = types.NewError(types.ErrInternal, err.Error(), "")
	}
	b, _ := json.MarshalIndent(te, "", "    ")
	return b
}
