// Package shim is thick mode's forwarder: it sends a CNI call to plexusd
// over its unix socket and hands back the answer.
package shim

import (
	"errors"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/cniargs"
	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config/daemonconf"
)

// forward sends the call to plexusd and returns its reply. When plexusd
// cannot be reached, an ADD waits daemonWait for it; a DEL (also one
// plexusd dropped midway) runs delFallback, which tears down from the
// record so a dead daemon never leaks, and its reply is nil; any other
// call fails, saying what the runtime does next.
func forward(conf *daemonconf.Daemon, call *wire.Call, delFallback func() error) (*wire.Reply, error) {
	client := &wire.Client{Socket: conf.DaemonSocket}
	reply, err := client.Do(call)
	if errors.Is(err, wire.ErrClosedEarly) {
		if call.Command() == "DEL" {
			return nil, delFallback()
		}
		return nil, types.NewError(codes.DaemonUnreachable, podOf(call)+": "+err.Error()+": the runtime fails this "+call.Command()+" and calls again (for an ADD, it tears the sandbox down and creates a new one)", "")
	}
	if !errors.Is(err, wire.ErrUnreachable) {
		return reply, err
	}
	switch call.Command() {
	case "DEL":
		return nil, delFallback()
	case "ADD":
		wait := conf.Wait()
		if err := client.WaitReady(time.Now().Add(wait)); err != nil {
			return nil, types.NewError(codes.DaemonUnreachable, podOf(call)+": "+err.Error()+" (waited "+wait.String()+")", "")
		}
		return client.Do(call)
	}
	return nil, types.NewError(codes.DaemonUnreachable, err.Error(), "")
}

// podOf names the pod of a call for messages, else its container.
func podOf(c *wire.Call) string {
	if p, _, err := cniargs.Load(c.CmdArgs().Args); err == nil && p.Ref() != "" {
		return "pod " + p.Ref()
	}
	return "container " + c.CmdArgs().ContainerID
}
