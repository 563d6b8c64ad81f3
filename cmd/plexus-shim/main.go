// Command plexus-shim is the plugin binary of thick mode: it forwards every
// CNI call to plexusd and relays the answer. The runtime starts it for
// every call, so it is built from the system call interface up: no CNI
// library, no net, no reflection. Its start costs about what a Go program
// that does nothing costs; plexusd checks the call as the CNI library's
// skel would have. While plexusd is down, a DEL becomes the full plexus
// plugin, which tears down from the attachment record.
package main

import (
	"syscall"

	"github.com/plexus-cni/plexus/cmd/internal/shim"
	"github.com/plexus-cni/plexus/core/config/daemonconf"
	"github.com/plexus-cni/plexus/core/daemon/wire"
)

// Version is set at build time.
var Version = "dev"

// versions are the CNI versions plexus supports, as the plexus plugin
// declares them.
const versions = `"0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"`

func main() {
	syscall.Exit(run())
}

// run returns the exit status: 0 after printing a result, 1 after
// printing a CNI error document.
func run() int {
	env := shim.CNIEnv(syscall.Environ())
	switch env["CNI_COMMAND"] {
	case "VERSION":
		return write(1, `{"cniVersion":"1.1.0","supportedVersions":[`+versions+`]}`+"\n", 0)
	case "":
		// As skel does: tell a person what this is.
		write(2, "plexus-shim "+Version+": forwards CNI calls to plexusd\nCNI protocol versions supported: "+versions+"\n", 0)
		return 0
	}
	stdin, err := wire.ReadAll(0, wire.MaxCallBytes)
	if err != nil {
		return fail(&shim.Error{Code: shim.CodeInvalidNetworkConfig, Msg: "reading the config from stdin: " + err.Error()})
	}
	conf, err := daemonconf.Parse(stdin)
	if err != nil {
		return fail(&shim.Error{Code: shim.CodeInvalidNetworkConfig, Msg: err.Error()})
	}
	if conf.Socket == "" {
		return fail(&shim.Error{Code: shim.CodeInvalidNetworkConfig, Msg: `plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode`})
	}
	reply, err := shim.Forward(conf, &wire.Call{Env: env, Stdin: stdin}, func() error { return becomeFullPlugin(stdin) })
	if err != nil {
		return fail(err)
	}
	if reply.Failed {
		if len(reply.Stdout) == 0 || reply.Stdout[0] != '{' {
			return fail(&shim.Error{Code: shim.CodeInternal, Msg: "plexusd returned an unreadable error: " + string(reply.Stdout)})
		}
		return write(1, string(reply.Stdout), 1)
	}
	return write(1, string(reply.Stdout), 0)
}

// fail prints err as a CNI error document.
func fail(err error) int {
	e, ok := err.(*shim.Error)
	if !ok {
		e = &shim.Error{Code: shim.CodeInternal, Msg: err.Error()}
	}
	return write(1, string(e.Document()), 1)
}

// write writes s to fd and returns status, or 1 when the write failed.
func write(fd int, s string, status int) int {
	b := []byte(s)
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		b = b[n:]
	}
	return status
}
