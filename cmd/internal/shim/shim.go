// Package shim is the plugin side of thick mode: it forwards a CNI call to
// plexusd and relays the answer exactly. It imports nothing heavy, so the
// plexus-shim binary starts in a fraction of the full plugin's time.
package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/daemon"
)

// CodeDaemonUnreachable: the shim could not reach plexusd for an ADD.
const CodeDaemonUnreachable uint = 115

// Forward sends the call (command is CNI_COMMAND) to plexusd and writes
// its answer to stdout, or returns its error. When plexusd cannot be
// reached, an ADD waits daemonWait for it; a DEL runs delFallback, which
// tears down from the attachment record without plexusd, so a dead daemon
// never leaks interfaces or leases; anything else fails.
func Forward(ctx context.Context, conf *config.Daemon, a *skel.CmdArgs, command string, stdout io.Writer, delFallback func() error) error {
	client := daemon.NewClient(conf.Socket)
	call := &daemon.Call{Env: daemon.CNIEnv(os.Environ()), Stdin: a.StdinData}
	reply, err := client.Do(ctx, call)
	if errors.Is(err, daemon.ErrUnreachable) {
		switch command {
		case "DEL":
			return delFallback()
		case "ADD":
			reply, err = waitAndRetry(ctx, conf, a, client, call)
		default:
			err = types.NewError(CodeDaemonUnreachable, err.Error(), "")
		}
	}
	if err != nil {
		return err
	}
	return Relay(reply, stdout)
}

func waitAndRetry(ctx context.Context, conf *config.Daemon, a *skel.CmdArgs, client *daemon.Client, call *daemon.Call) (*daemon.Reply, error) {
	wctx, cancel := context.WithTimeout(ctx, conf.Wait)
	defer cancel()
	if err := client.WaitReady(wctx); err != nil {
		return nil, types.NewError(CodeDaemonUnreachable, fmt.Sprintf("%s: %v (waited %s)", podOf(a), err, conf.Wait), "")
	}
	return client.Do(ctx, call)
}

// Relay writes a success as it came, and turns a failure back into the
// CNI error skel prints, so the runtime sees plexusd's code and message.
func Relay(r *daemon.Reply, stdout io.Writer) error {
	if !r.Failed {
		_, err := stdout.Write(r.Stdout)
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
	var ns, name string
	for _, kv := range strings.Split(a.Args, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			ns = v
		case "K8S_POD_NAME":
			name = v
		}
	}
	if name != "" {
		return "pod " + ns + "/" + name
	}
	return "container " + a.ContainerID
}
