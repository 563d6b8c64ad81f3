package wire

import "github.com/containernetworking/cni/pkg/skel"

// The CNI_* variables a call carries.
const (
	envCommand       = "CNI_COMMAND"
	envContainerID   = "CNI_CONTAINERID"
	envNetns         = "CNI_NETNS"
	envIfName        = "CNI_IFNAME"
	envArgs          = "CNI_ARGS"
	envPath          = "CNI_PATH"
	envNetnsOverride = "CNI_NETNS_OVERRIDE"
)

// NewCall is the call the shim forwards, empty variables left out as skel does.
func NewCall(command string, a *skel.CmdArgs) *Call {
	env := map[string]string{envCommand: command}
	for k, v := range map[string]string{
		envContainerID: a.ContainerID, envNetns: a.Netns, envIfName: a.IfName,
		envArgs: a.Args, envPath: a.Path, envNetnsOverride: a.NetnsOverride,
	} {
		if v != "" {
			env[k] = v
		}
	}
	return &Call{Env: env, Stdin: a.StdinData}
}

// Command is the call's CNI_COMMAND.
func (c *Call) Command() string { return c.Env[envCommand] }

// CmdArgs is the call as skel hands it to a plugin (plexusd's side).
func (c *Call) CmdArgs() *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID:   c.Env[envContainerID],
		Netns:         c.Env[envNetns],
		IfName:        c.Env[envIfName],
		Args:          c.Env[envArgs],
		Path:          c.Env[envPath],
		NetnsOverride: c.Env[envNetnsOverride],
		StdinData:     c.Stdin,
	}
}
