// Package shim is thick mode's forwarder: it sends a CNI call to plexusd
// over its unix socket and hands back the answer.
package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/cmd/internal/cniargs"
	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config/daemonconf"
)

// FullPlugin is the full plugin beside the shim, for a DEL without plexusd.
const FullPlugin = "plexus"

// Versions are the CNI versions the shim answers VERSION with: plexus's.
func Versions() version.PluginInfo { return version.PluginSupports(wire.CNIVersions...) }

// Funcs are plexus-shim's commands for skel: each forwards the call.
func Funcs(stdout, stderr io.Writer) skel.CNIFuncs {
	forward := func(command string) func(*skel.CmdArgs) error {
		return func(a *skel.CmdArgs) error { return Call(command, a, stdout, stderr) }
	}
	return skel.CNIFuncs{Add: forward("ADD"), Del: forward("DEL"), Check: forward("CHECK"), GC: forward("GC"), Status: forward("STATUS")}
}

// Call forwards one call to plexusd, reading only the config's daemon keys.
func Call(command string, a *skel.CmdArgs, stdout, stderr io.Writer) error {
	conf, err := readConfig(a.StdinData)
	if err != nil {
		return types.NewError(codes.InvalidNetworkConfig, err.Error(), "")
	}
	call := wire.NewCall(command, a)
	reply, err := forward(conf, call, func() error { return runFullPlugin(call, stdout, stderr) })
	if err != nil || reply == nil { // nil: the full plugin ran the DEL
		return err
	}
	return relay(reply, stdout)
}

// readConfig checks the config's size and reads its daemon keys.
func readConfig(raw []byte) (*daemonconf.Daemon, error) {
	if len(raw) > wire.MaxCallBytes {
		return nil, errors.New("the config on stdin is over the limit of a call to plexusd")
	}
	conf, err := daemonconf.Parse(raw)
	if err != nil {
		return nil, err
	}
	if conf.DaemonSocket == "" {
		return nil, errors.New(`plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode`)
	}
	return conf, nil
}

// relay writes a success as it came, a failure as the CNI error it carries.
func relay(r *wire.Reply, stdout io.Writer) error {
	if !r.Failed {
		_, err := stdout.Write(r.Stdout)
		return err
	}
	var e types.Error
	if err := json.Unmarshal(r.Stdout, &e); err != nil || e.Code == 0 {
		return types.NewError(codes.Internal, "plexusd returned an unreadable error: "+string(r.Stdout), "")
	}
	return &e
}

// runFullPlugin runs the full plugin on the call (a DEL without plexusd).
func runFullPlugin(call *wire.Call, stdout, stderr io.Writer) error {
	me, err := os.Executable()
	if err != nil {
		return types.NewError(codes.Internal, "finding the plexus plugin for a DEL without plexusd: "+err.Error(), "")
	}
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(filepath.Dir(me), FullPlugin))
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ(call), bytes.NewReader(call.Stdin), &out, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		// A plugin that failed printed its error: that is the answer.
		return relay(&wire.Reply{Stdout: out.Bytes(), Failed: true}, stdout)
	case err != nil:
		return types.NewError(codes.Internal, "running "+cmd.Path+" for a DEL without plexusd: "+err.Error(), "")
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// environ is the call's environment as a process's.
func environ(call *wire.Call) []string {
	env := make([]string, 0, len(call.Env))
	for k, v := range call.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

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
