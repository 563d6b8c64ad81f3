package cniplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/daemon"
	"github.com/plexus-cni/plexus/core/pipeline"
)

// CodeDaemonUnreachable: the shim could not reach plexusd for an ADD.
const CodeDaemonUnreachable uint = 115

// forward is the shim: the call goes to plexusd as the runtime made it, and
// plexusd's answer comes back as if this process had run the pipeline.
func (o Options) forward(ctx context.Context, conf *config.Config, a *skel.CmdArgs, cmd Command) error {
	client := daemon.NewClient(conf.DaemonSocket)
	call := &daemon.Call{Env: daemon.CNIEnv(os.Environ()), Stdin: a.StdinData}
	reply, err := client.Do(ctx, call)
	if errors.Is(err, daemon.ErrUnreachable) {
		reply, err = o.unreachable(ctx, conf, a, cmd, client, call, err)
	}
	if err != nil {
		return err
	}
	if cmd == CmdDel && reply.Stdout == nil && !reply.Failed {
		return nil // torn down in this process
	}
	return relay(reply)
}

// unreachable decides what a call does without plexusd: ADD waits a little
// for it (a restart), DEL tears down from the record in this process so a
// dead daemon never leaks interfaces or leases, the rest fail.
func (o Options) unreachable(ctx context.Context, conf *config.Config, a *skel.CmdArgs, cmd Command, client *daemon.Client, call *daemon.Call, cause error) (*daemon.Reply, error) {
	switch cmd {
	case CmdDel:
		// A DEL source never touches the API, so this needs nothing of plexusd.
		return &daemon.Reply{}, o.Run(ctx, CmdDel, a, os.Stdout)
	case CmdAdd:
		wctx, cancel := context.WithTimeout(ctx, conf.DaemonWaitDuration)
		defer cancel()
		if err := client.WaitReady(wctx); err != nil {
			return nil, types.NewError(CodeDaemonUnreachable, fmt.Sprintf("%s: %v (waited %s)", podOf(a), err, conf.DaemonWaitDuration), "")
		}
		return client.Do(ctx, call)
	}
	return nil, types.NewError(CodeDaemonUnreachable, cause.Error(), "")
}

// relay prints a success as it came, and turns a failure back into the
// CNI error skel prints, so the runtime sees plexusd's code and message.
func relay(r *daemon.Reply) error {
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

// podOf names the pod of a call for messages.
func podOf(a *skel.CmdArgs) string {
	args, _ := parseArgs(a.Args)
	req := pipeline.Request{Args: args}
	if name := req.Arg(pipeline.ArgPodName); name != "" {
		return "pod " + req.Arg(pipeline.ArgPodNamespace) + "/" + name
	}
	return "container " + a.ContainerID
}
