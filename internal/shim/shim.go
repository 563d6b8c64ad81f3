// Package shim is thick mode's forwarder: it sends a CNI call to plexusd
// over its unix socket and hands back the answer exactly. The plexus-shim
// binary is Main.
package shim

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config/daemonconf"
	"github.com/plexus-cni/plexus/internal/daemon/wire"
	"github.com/plexus-cni/plexus/internal/jsonstr"
)

// CNIVersions are the CNI versions plexus supports (the plugin's, plexusd's
// and the shim's), oldest first.
var CNIVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// Error is a CNI error: what the runtime reads from a failing plugin.
type Error struct {
	Code uint
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Document is the error as a plugin prints it, indented as the CNI
// library's skel prints it.
func (e *Error) Document() []byte {
	return []byte("{\n    \"code\": " + strconv.FormatUint(uint64(e.Code), 10) + ",\n    \"msg\": " + string(jsonstr.Append(nil, e.Msg)) + "\n}\n")
}

// Forward sends the call to plexusd and returns its reply. When plexusd
// cannot be reached, an ADD waits daemonWait for it to become ready; a DEL
// runs delFallback, which tears down from the attachment record without
// plexusd, so a dead daemon never leaks interfaces or leases, and its reply
// is nil; any other command fails.
func Forward(conf *daemonconf.Daemon, call *wire.Call, delFallback func() error) (*wire.Reply, error) {
	client := &wire.Client{Socket: conf.DaemonSocket}
	reply, err := client.Do(call)
	if !errors.Is(err, wire.ErrUnreachable) {
		return reply, err
	}
	switch call.Env["CNI_COMMAND"] {
	case "DEL":
		return nil, delFallback()
	case "ADD":
		wait := conf.Wait()
		if err := client.WaitReady(time.Now().Add(wait)); err != nil {
			return nil, &Error{codes.DaemonUnreachable, podOf(call) + ": " + err.Error() + " (waited " + wait.String() + ")"}
		}
		return client.Do(call)
	}
	return nil, &Error{codes.DaemonUnreachable, err.Error()}
}

// CNIEnv collects the CNI_* variables of an environment; a repeated one
// keeps its last value.
func CNIEnv(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && len(k) > 4 && strings.HasPrefix(k, "CNI_") {
			env[k] = v
		}
	}
	return env
}

// podOf names the pod of a call for messages.
func podOf(c *wire.Call) string {
	var ns, name string
	for kv := range strings.SplitSeq(c.Env["CNI_ARGS"], ";") {
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
	return "container " + c.Env["CNI_CONTAINERID"]
}
