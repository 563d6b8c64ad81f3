package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/internal/daemon"
	"github.com/plexus-cni/plexus/internal/shim"
)

// Versions are the CNI versions plexus supports.
var Versions = version.PluginSupports(shim.CNIVersions...)

// Main is the plexus binary. It answers VERSION, and a call without a
// command, as the CNI library's skel does; it checks every other call as
// skel would, parses plexus's config once, and forwards the call to
// plexusd (daemonSocket set) or runs it here. It returns the exit status;
// a failure is printed on stdout as skel prints it.
func Main(o Options, about string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := o.main(ctx, os.Environ(), os.Stdin, os.Stdout, os.Stderr, about); err != nil {
		_, _ = os.Stdout.Write(errorDocument(err))
		return 1
	}
	return 0
}

func (o Options) main(ctx context.Context, environ []string, stdin io.Reader, stdout, stderr io.Writer, about string) error {
	env := shim.CNIEnv(environ)
	switch env["CNI_COMMAND"] {
	case "":
		fmt.Fprintf(stderr, "%s\nCNI protocol versions supported: %s\n", about, strings.Join(Versions.SupportedVersions(), ", "))
		return nil
	case "VERSION":
		if err := Versions.Encode(stdout); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("error reading from stdin: %v", err), "")
	}
	cmd, a, conf, err := o.accept(&daemon.Call{Env: env, Stdin: in})
	if err != nil {
		return err
	}
	if err := checkThin(conf); err != nil {
		return err
	}
	return o.Run(ctx, conf, cmd, a, stdout)
}

// checkThin refuses a config of type plexus that names plexusd's socket:
// the plugin runs every call itself, the shim forwards. A config of type
// plexus-shim reaches the plugin only for the shim's DEL while plexusd is
// down, which runs here.
func checkThin(conf *config.Config) error {
	if conf.DaemonSocket == "" || conf.Type != "plexus" {
		return nil
	}
	return types.NewError(types.ErrInvalidNetworkConfig, `plexus config: "daemonSocket" is set but "type" is "plexus", which runs every call itself; `+
		`name "type": "plexus-shim" to forward calls to plexusd`, "")
}

// Handle runs a call forwarded by the shim (plexusd's side): the same
// command with the same environment and config, checked as the plugin
// checks it, answered with exactly what the plugin would print.
func (o Options) Handle(ctx context.Context, c *daemon.Call) *daemon.Reply {
	cmd, a, conf, err := o.accept(c)
	if err == nil {
		var out bytes.Buffer
		if err = o.Run(ctx, conf, cmd, a, &out); err == nil {
			return &daemon.Reply{Stdout: out.Bytes()}
		}
	}
	return &daemon.Reply{Stdout: errorDocument(err), Failed: true}
}

// accept reads the CNI environment and config and checks them as skel
// does before it calls a plugin (the shim forwards without looking), and
// parses plexus's config: once, for the whole call.
func (o Options) accept(c *daemon.Call) (Command, *skel.CmdArgs, *config.Config, error) {
	cmd, err := ParseCommand(c.Env["CNI_COMMAND"])
	if err != nil {
		return 0, nil, nil, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
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
		return 0, nil, nil, err
	}
	conf, err := o.parseConfig(cmd, a.StdinData)
	if err != nil {
		return 0, nil, nil, err
	}
	if err := checkNetNS(cmd, a); err != nil {
		return 0, nil, nil, err
	}
	return cmd, a, conf, nil
}

// parseConfig parses plexus's config and checks its name and cniVersion
// as skel checks them. When plexus refuses the config, skel's reading of
// it comes first, so the runtime sees skel's error for what skel refuses.
func (o Options) parseConfig(cmd Command, stdin []byte) (*config.Config, error) {
	parse := o.parse
	if parse == nil {
		parse = config.Parse
	}
	conf, err := parse(stdin)
	if err != nil {
		if serr := skelRefuses(cmd, stdin); serr != nil {
			return nil, serr
		}
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if err := checkNetwork(cmd, conf.Name, conf.CNIVersion); err != nil {
		return nil, err
	}
	return conf, nil
}

// skelRefuses reads a config plexus could not parse as skel reads it; only
// this failure path reads the config a second time.
func skelRefuses(cmd Command, stdin []byte) error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return checkNetwork(cmd, "", "")
	}
	v, err := (&version.ConfigDecoder{}).Decode(stdin)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	return checkNetwork(cmd, conf.Name, v)
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

// checkNetwork checks the network name, that plexus speaks the config's
// CNI version, and that the version has the command at all.
func checkNetwork(cmd Command, name, cniVersion string) error {
	if name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
	}
	if err := utils.ValidateNetworkName(name); err != nil {
		return err
	}
	if cniVersion == "" {
		cniVersion = "0.1.0" // the CNI library's reading of a config without one
	}
	if verr := (&version.Reconciler{}).Check(cniVersion, Versions); verr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verr.Details())
	}
	since := map[Command]string{CmdCheck: "0.4.0", CmdGC: "1.1.0", CmdStatus: "1.1.0"}[cmd]
	if since == "" {
		return nil
	}
	if ok, err := version.GreaterThanOrEqualTo(cniVersion, since); err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	} else if !ok {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("config version does not allow %s", cmd), "")
	}
	return nil
}

// checkNetNS refuses an ADD or a DEL naming the plugin's (or plexusd's)
// own network namespace.
func checkNetNS(cmd Command, a *skel.CmdArgs) error {
	if (cmd != CmdAdd && cmd != CmdDel) || a.Netns == "" || a.NetnsOverride == "1" || strings.EqualFold(a.NetnsOverride, "true") {
		return nil
	}
	own, err := ns.CheckNetNS(a.Netns)
	if err != nil {
		return err
	}
	if own {
		return types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
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
