package node

import (
	"fmt"
	"os"
	"path/filepath"
)

// containerd2 is containerd 2.x (Containerd2): configured, started and
// inspected as containerd 1.6 is but for its config's format, its
// binaries and what it does for CNI 1.1.0. It takes runc and, to import
// images, ctr from Debian (containerd.hostBins).
type containerd2 struct{ containerd }

func (containerd2) Name() Runtime { return Containerd2 }

func (containerd2) bins() []string {
	return []string{"containerd2", "containerd2-shim-runc-v2"}
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

func (containerd2) writeConfig(n *Node) error {
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

func (containerd2) command(n *Node, debug bool) (string, []string, []string, error) {
	return filepath.Join(n.binDir, "containerd2"), containerdArgs(n, debug), nil, nil
}

// traits: containerd 2.x takes 1.1.0 configs and sends STATUS for them
// (CNIStatus), but no GC.
func (containerd2) traits() traits {
	return traits{
		delAtRemoval:   true,
		infraContainer: true,
		imageVolumes:   true,
		skips: map[string]string{
			"DELWithCachedConfig": containerdDELReason,
			"CheckAfterAdd":       containerdCheckReason,
			"CheckAfterAddThick":  containerdCheckReason,
		},
	}
}
