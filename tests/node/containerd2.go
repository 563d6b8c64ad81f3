package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Runtime is the container runtime a node runs under kubelet.
type Runtime string

const (
	// Containerd is Debian's containerd 1.6 with its runc shim.
	Containerd Runtime = "containerd"
	// Containerd2 is containerd 2.x and its runc shim, built from the Go
	// module pinned in tools/containerd2 (`make runtimes`), on Debian's
	// runc.
	Containerd2 Runtime = "containerd2"
	// CRIO is CRI-O, built from the Go module pinned in tools/crio with
	// its pinns and copyimg (`make runtimes`), on Debian's conmon and runc
	// (crio.go).
	CRIO Runtime = "crio"
)

// RuntimeEnv selects the runtime of nodes whose Options.Runtime is empty:
// "containerd" (the default), "containerd2" or "crio".
const RuntimeEnv = "PLEXUS_RUNTIME"

// runtimeOf is opts' runtime, else RuntimeEnv's, else Containerd.
func runtimeOf(opts Options) (Runtime, error) {
	r := opts.Runtime
	if r == "" {
		r = Runtime(os.Getenv(RuntimeEnv))
	}
	switch r {
	case "":
		return Containerd, nil
	case Containerd, Containerd2, CRIO:
		return r, nil
	}
	return "", fmt.Errorf("%s=%q: want %q, %q or %q", RuntimeEnv, r, Containerd, Containerd2, CRIO)
}

// runtimeBins are the binaries of runtime r that `make runtimes` builds
// into BinDir (Debian's containerd comes from PATH).
func runtimeBins(r Runtime) []string {
	switch r {
	case Containerd2:
		return []string{"containerd2", "containerd2-shim-runc-v2"}
	case CRIO:
		return []string{"crio", "pinns", "crio-copyimg"}
	}
	return nil
}

// hostBinsOf are the binaries runtime r needs from Debian (`make
// node-deps`): containerd 2.x uses Debian's runc and, to import images,
// ctr; CRI-O uses conmon and runc.
func hostBinsOf(r Runtime) []string {
	if r == CRIO {
		return []string{"conmon", "runc"}
	}
	return hostBins
}

// containerdPath is the daemon the node runs.
func (n *Node) containerdPath(t testing.TB) string {
	switch n.Runtime {
	case Containerd2:
		return filepath.Join(n.binDir, "containerd2")
	case CRIO:
		return filepath.Join(n.binDir, "crio")
	}
	return mustLookPath(t, "containerd")
}

// containerd2Config is containerd 2.x's whole configuration, in the
// version 3 format every 2.x release reads (docs/cri/config.md): the CRI
// plugin is split into io.containerd.cri.v1.images (snapshotter, the
// sandbox image as pinned_images.sandbox) and io.containerd.cri.v1.runtime
// (runtimes, CNI, netns and OOM settings); the gRPC server settings stay
// in io.containerd.grpc.v1.cri. Everything it writes goes under the node's
// directory, as with containerd 1.6 (containerdConfig).
const containerd2Config = `version = 3
root = %[1]q
state = %[2]q
# Plugins that would look at or create system paths (/opt/containerd,
# /var/run/nri) or that this node does not use.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
  "io.containerd.image-verifier.v1.bindir",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = %[8]q
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[5]q

[plugins.'io.containerd.cri.v1.runtime']
  # As for containerd 1.6 (containerdConfig).
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  # CDI is always on in 2.x: no specs from the host's /etc/cdi.
  cdi_spec_dirs = [%[11]q]
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q
    max_conf_num = 1
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # The shim built with this containerd, not Debian's in PATH.
      runtime_path = %[10]q
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        Root = %[9]q
`

func (n *Node) writeContainerd2Config() error {
	snap, err := snapshotter(n.Dir)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(containerd2Config,
		filepath.Join(n.Dir, "containerd"), filepath.Join(n.Dir, "state"),
		n.Socket, n.Socket+".ttrpc", PauseImage,
		n.cniBinDir, n.ConfDir, snap, filepath.Join(n.Dir, "runc"),
		filepath.Join(n.binDir, "containerd2-shim-runc-v2"), filepath.Join(n.Dir, "cdi"))
	return os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(conf), 0o644)
}

// logRuntimeVersion logs the CRI's name and version of the runtime, so a
// test's output says which runtime it ran on.
func (n *Node) logRuntimeVersion() {
	n.t.Helper()
	out, err := n.Crictl(n.t.Context(), "version")
	if err != nil {
		n.t.Logf("node %s: %v", n.Name, err)
		return
	}
	n.t.Logf("node %s on %s:\n%s", n.Name, n.Runtime, strings.TrimSpace(out))
}
