package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/internal/daemon"
	"github.com/plexus-cni/plexus/internal/shim"
)

// Versions are the CNI versions plexus supports.
var Versions = version.PluginSupports(shim.CNIVersions...)

// Handle runs a call forwarded by the shim (plexusd's side): the same
// command with the same environment and config, checked as the CNI
// library's skel checks a plugin's call, answered with exactly what the
// plugin would print.
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

// cmdArgs reads the CNI environment and config and checks them as skel
// does before it calls a plugin: the shim forwards without looking.
func cmdArgs(c *daemon.Call) (Command, *skel.CmdArgs, error) {
	cmd, err := ParseCommand(c.Env["CNI_COMMAND"])
	if err != nil {
		return 0, nil, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	a := &skel.CmdArgs{
		ContainerID:   c.Env["CNI_CONTAINERID"],
		Netns:         c.Env["CNI_NETNS"],
		IfName:        c.Env["CNI_IFNAME"],
		Args:          c.Env["CNI_ARGS"],
		Path:          c.Env["CNI_PATH"],
		NetnsOverride: c.Env["CNI_NETNS_OVERRIDE"],
		StdinData:     c.Stdin,
	}
	if err := checkEnv(cmd, a); err != nil {
		return 0, nil, err
	}
	if err := checkConfig(cmd, a); err != nil {
		return 0, nil, err
	}
	return cmd, a, nil
}

// checkEnv requires and checks the variables each command needs.
func checkEnv(cmd Command, a *skel.CmdArgs) error {
	vars := []struct {
		name, value string
		need        bool
		check       func(string) *types.Error
	}{
		{"CNI_CONTAINERID", a.ContainerID, cmd <= CmdCheck, utils.ValidateContainerID},
		{"CNI_NETNS", a.Netns, cmd == CmdAdd || cmd == CmdCheck, nil},
		{"CNI_IFNAME", a.IfName, cmd <= CmdCheck, utils.ValidateInterfaceName},
		{"CNI_PATH", a.Path, true, nil},
	}
	var missing []string
	for _, v := range vars {
		switch {
		case v.value == "" && v.need:
			missing = append(missing, v.name)
		case v.value != "" && v.need && v.check != nil:
			if err := v.check(v.value); err != nil {
				return err
			}
		}
	}
	if len(missing) > 0 {
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("required env variables [%s] missing", strings.Join(missing, ",")), "")
	}
	return nil
}

// checkConfig checks the network name, that plexus speaks the config's
// CNI version, and that the version has the command at all; an ADD or a
// DEL must not name plexusd's own network namespace.
func checkConfig(cmd Command, a *skel.CmdArgs) error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(a.StdinData, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
	}
	if err := utils.ValidateNetworkName(conf.Name); err != nil {
		return err
	}
	confVersion, err := (&version.ConfigDecoder{}).Decode(a.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if verr := (&version.Reconciler{}).Check(confVersion, Versions); verr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verr.Details())
	}
	since := map[Command]string{CmdCheck: "0.4.0", CmdGC: "1.1.0", CmdStatus: "1.1.0"}[cmd]
	if since != "" {
		if ok, err := version.GreaterThanOrEqualTo(confVersion, since); err != nil {
			return types.NewError(types.ErrDecodingFailure, err.Error(), "")
		} else if !ok {
			return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("config version does not allow %s", cmd), "")
		}
	}
	if (cmd == CmdAdd || cmd == CmdDel) && a.Netns != "" && a.NetnsOverride != "1" && !strings.EqualFold(a.NetnsOverride, "true") {
		own, err := ns.CheckNetNS(a.Netns)
		if err != nil {
			return err
		}
		if own {
			return types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
		}
	}
	return nil
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
