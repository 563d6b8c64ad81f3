package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config/daemonconf"
	"github.com/plexus-cni/plexus/internal/daemon/wire"
)

// FullPlugin is the full plexus plugin's file name; thick mode installs it
// beside the shim, which runs it for a DEL while plexusd is down.
const FullPlugin = "plexus"

// Main is the plexus-shim binary: it answers VERSION itself, forwards
// every other call to plexusd, prints the answer exactly and returns the
// exit status. It reads daemonSocket and daemonWait from the config and
// nothing else: plexusd checks the call as the CNI library's skel would,
// and parses the whole config. about is what a person running it without
// a command is told.
func Main(about string, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := CNIEnv(environ)
	switch env["CNI_COMMAND"] {
	case "VERSION":
		return status(versionInfo(stdout), 0)
	case "":
		_, err := io.WriteString(stderr, about+"\nCNI protocol versions supported: "+strings.Join(CNIVersions, ", ")+"\n")
		return status(err, 0)
	}
	raw, conf, err := readConfig(stdin)
	if err != nil {
		return fail(stdout, &Error{codes.InvalidNetworkConfig, err.Error()})
	}
	var delStatus int
	reply, err := Forward(conf, &wire.Call{Env: env, Stdin: raw}, func() (err error) {
		delStatus, err = runFullPlugin(raw, stdout, stderr)
		return err
	})
	var se *Error
	switch {
	case errors.As(err, &se):
		return fail(stdout, se)
	case err != nil:
		return fail(stdout, &Error{codes.Internal, err.Error()})
	case reply == nil: // the full plugin ran the DEL and answered
		return delStatus
	case reply.Failed && !bytes.HasPrefix(reply.Stdout, []byte("{")):
		return fail(stdout, &Error{codes.Internal, "plexusd returned an unreadable error: " + string(reply.Stdout)})
	case reply.Failed:
		_, err := stdout.Write(reply.Stdout)
		return status(err, 1)
	}
	_, err = stdout.Write(reply.Stdout)
	return status(err, 0)
}

// readConfig reads the config from stdin, bounded as plexusd bounds a
// call, and its daemon keys.
func readConfig(stdin io.Reader) ([]byte, *daemonconf.Daemon, error) {
	raw, err := io.ReadAll(io.LimitReader(stdin, wire.MaxCallBytes+1))
	if err != nil {
		return nil, nil, errors.New("reading the config from stdin: " + err.Error())
	}
	if len(raw) > wire.MaxCallBytes {
		return nil, nil, errors.New("reading the config from stdin: over the limit of a call to plexusd")
	}
	conf, err := daemonconf.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	if conf.DaemonSocket == "" {
		return nil, nil, errors.New(`plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode`)
	}
	return raw, conf, nil
}

// runFullPlugin runs the full plexus plugin on this call, for a DEL while
// plexusd is unreachable: same environment, the same config on its stdin,
// its output and exit status the answer.
func runFullPlugin(conf []byte, stdout, stderr io.Writer) (int, error) {
	me, err := os.Executable()
	if err != nil {
		return 0, errors.New("finding the plexus plugin for a DEL without plexusd: " + err.Error())
	}
	cmd := exec.Command(filepath.Join(filepath.Dir(me), FullPlugin))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(conf), stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		// A plugin that failed printed its error: that is the answer.
		return max(exit.ExitCode(), 1), nil
	}
	if err != nil {
		return 0, errors.New("running " + cmd.Path + " for a DEL without plexusd: " + err.Error())
	}
	return 0, nil
}

// versionInfo is the answer to VERSION, as the CNI library's skel prints
// it (the shim does not load that library: it starts for every call).
func versionInfo(w io.Writer) error {
	return json.NewEncoder(w).Encode(struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}{CNIVersions[len(CNIVersions)-1], CNIVersions})
}

// fail prints a CNI error and returns the failing status.
func fail(stdout io.Writer, e *Error) int {
	_, err := stdout.Write(e.Document())
	return status(err, 1)
}

// status is want, or 1 when the output could not be written.
func status(err error, want int) int {
	if err != nil {
		return 1
	}
	return want
}
