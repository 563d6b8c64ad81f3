package harness

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
)

// CNITool runs one command (add, check or del) of the network "plexus" in
// NetConf as cnitool does: libcni, as cnitool and containerd use it, the
// same container ID ("cnitool-" and a hash of the namespace's path), and
// the result, or on failure the plugins' stderr and the error, as cnitool
// prints them. Unlike cnitool,
// libcni's result cache is the World's (RuntimeCacheDir), not the host's
// /var/lib/cni.
func (h *World) CNITool(c *Container, command string) (string, error) {
	var stderr bytes.Buffer
	out, err := h.runtimeCall(c, command, &stderr)
	if err != nil {
		msg := out + stderr.String() + err.Error() + "\n"
		return msg, fmt.Errorf("cnitool %s: %w: %s", command, err, msg)
	}
	return out, nil
}

// RuntimeCacheDir is libcni's cache directory of CNITool's calls.
func (h *World) RuntimeCacheDir() string { return filepath.Join(h.Dir, "runtime-cache") }

func (h *World) runtimeCall(c *Container, command string, stderr *bytes.Buffer) (string, error) {
	list, err := libcni.LoadNetworkConf(h.NetConf, "plexus")
	if err != nil {
		return "", err
	}
	rt, err := c.runtimeConf()
	if err != nil {
		return "", err
	}
	exec := taggedExec{
		DefaultExec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: stderr}},
		env:         append([]string{h.tag(), "NETCONFPATH=" + h.NetConf}, c.Env...),
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{BinDir}, h.RuntimeCacheDir(), exec)
	ctx := context.Background()
	switch command {
	case "add":
		res, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil || res == nil {
			return "", err
		}
		var out bytes.Buffer
		err = res.PrintTo(&out)
		return out.String(), err
	case "check":
		return "", cni.CheckNetworkList(ctx, list, rt)
	case "del":
		return "", cni.DelNetworkList(ctx, list, rt)
	}
	return "", fmt.Errorf("unknown command %q", command)
}

// runtimeConf is the runtime's side of a call for c, as cnitool builds it
// from CNI_ARGS, CAP_ARGS and CNI_IFNAME.
func (c *Container) runtimeConf() (*libcni.RuntimeConf, error) {
	path, err := filepath.Abs(c.NS.Path())
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum512([]byte(path))
	rt := &libcni.RuntimeConf{ContainerID: fmt.Sprintf("cnitool-%x", sum[:10]), NetNS: path, IfName: "eth0"}
	for _, kv := range strings.Split(c.cniArgs(true), ";") {
		k, v, _ := strings.Cut(kv, "=")
		rt.Args = append(rt.Args, [2]string{k, v})
	}
	for _, e := range c.Env {
		k, v, _ := strings.Cut(e, "=")
		switch k {
		case "CAP_ARGS":
			if err := json.Unmarshal([]byte(v), &rt.CapabilityArgs); err != nil {
				return nil, fmt.Errorf("CAP_ARGS: %w", err)
			}
		case "CNI_IFNAME":
			rt.IfName = v
		}
	}
	return rt, nil
}

// taggedExec runs plugins with env added to the environment libcni gives
// them, as cnitool's own environment would be: the World's tag (for
// StrayProcesses) and the Container's Env. libcni's CNI_* variables come
// last and win.
type taggedExec struct {
	*invoke.DefaultExec
	env []string
}

func (e taggedExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	return e.DefaultExec.ExecPlugin(ctx, path, stdin, append(slices.Clone(e.env), environ...))
}
