package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// containerd is Debian's containerd 1.6 with its runc shim (Containerd).
type containerd struct{}

func (containerd) Name() Runtime { return Containerd }

// bins: Debian's containerd comes from PATH.
func (containerd) bins() []string { return nil }

func (containerd) hostBins() []string { return hostBins }

// containerdConfig is containerd's whole configuration: everything it
// writes goes under the node's directory, its CRI plugin uses the node's
// CNI directories and the locally built pause image.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
# Plugins that would look at system paths (/opt/containerd) or need disks
# and kernel features this node does not use.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # The VM refuses lowering oom_score_adj; without this runc fails every
  # sandbox with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Sandbox network namespaces under the state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %[8]q
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's state, otherwise in /run/containerd/runc.
        Root = %[9]q
`

func (containerd) writeConfig(n *Node) error {
	snap, err := snapshotter(n.Dir)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(containerdConfig,
		filepath.Join(n.Dir, "containerd"), filepath.Join(n.Dir, "state"),
		n.Socket, n.Socket+".ttrpc", PauseImage,
		n.cniBinDir, n.ConfDir, snap, filepath.Join(n.Dir, "runc"))
	return os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(conf), 0o644)
}

func (containerd) command(n *Node, debug bool) (string, []string, []string, error) {
	path, err := lookPath("containerd")
	return path, containerdArgs(n, debug), nil, err
}

// containerdArgs are containerd's (1.6 and 2.x) command line: the
// config writeConfig wrote.
func containerdArgs(n *Node, debug bool) []string {
	args := []string{"--config", filepath.Join(n.Dir, "containerd.toml")}
	if debug {
		args = append(args, "--log-level", "debug")
	}
	return args
}

// importImage imports the archive with ctr into the CRI's namespace
// (k8s.io), unpacked for the node's snapshotter. ctr takes the image's
// name from the archive, which `make pause-image` gives PauseImage.
func (containerd) importImage(n *Node, archive, _ string) error {
	snap, err := snapshotter(n.Dir)
	if err != nil {
		return err
	}
	ctr, err := lookPath("ctr")
	if err != nil {
		return err
	}
	out, err := exec.Command(ctr, "--address", n.Socket, "--namespace", "k8s.io",
		"images", "import", "--snapshotter", snap, archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", archive, err, out)
	}
	return nil
}

// loadedNetwork is the network of containerd's CRI status (crictl info)
// that is not loopback.
func (containerd) loadedNetwork(ctx context.Context, n *Node) (string, []byte, error) {
	out, err := n.Crictl(ctx, "info")
	if err != nil {
		return "", nil, err
	}
	var info struct {
		CNIConfig struct {
			Networks []struct {
				Config struct {
					Name   string `json:"Name"`
					Source string `json:"Source"`
				} `json:"Config"`
				IFName string `json:"IFName"`
			} `json:"Networks"`
		} `json:"cniconfig"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		return "", nil, fmt.Errorf("crictl info: %w", err)
	}
	for _, nw := range info.CNIConfig.Networks {
		if nw.IFName != "lo" {
			return nw.Config.Name, []byte(nw.Config.Source), nil
		}
	}
	return "", nil, nil
}

// uses asks containerd's CRI status for the loaded network and its bytes.
func (c containerd) uses(n *Node, _ string, data []byte, network string) (cniUse, error) {
	return func(ctx context.Context) (bool, string) {
		got, loaded, err := c.loadedNetwork(ctx, n)
		if err != nil {
			return false, ""
		}
		return got == network && bytes.Equal(loaded, data), fmt.Sprintf("it uses %q", got)
	}, nil
}

// netnsDir is the netns directory under the CRI plugin's state directory
// (netns_mounts_under_state_dir); containerd 2.x keeps the 1.6 plugin's
// name for it.
func (containerd) netnsDir(n *Node) string {
	return filepath.Join(n.Dir, "state", "io.containerd.grpc.v1.cri", "netns")
}

// cniSetupLines: containerd logs "begin cni setup" and "cni result" for
// the sandbox (loopback's ADD within), each line ending with its ID.
func (containerd) cniSetupLines(id, _, _ string) (string, string, func(string) bool) {
	match := func(line string) bool { return strings.HasSuffix(line, "podsandboxid="+id) }
	return `msg="begin cni setup"`, `msg="cni result:`, match
}

// monitorPIDs are the runc shims, which name the node's socket on their
// command line.
func (containerd) monitorPIDs(n *Node) []int {
	want := "\x00-address\x00" + n.Socket + "\x00"
	var out []int
	for _, p := range procCmdlines() {
		if strings.Contains("\x00"+p.cmdline, want) {
			out = append(out, p.pid)
		}
	}
	return out
}

func (containerd) traits() traits {
	return traits{
		delAtRemoval:   true,
		infraContainer: true,
		skips: map[string]string{
			"CNIVersion110":       "containerd 1.6's libcni rejects a 1.1.0 result (CNIVersion)",
			"CNIStatus":           "containerd 1.6 sends no CNI STATUS: it needs a 1.1.0 config, whose results 1.6 rejects",
			"GCAtStart":           "containerd 1.6 sends no CNI GC: it needs a 1.1.0 config, whose results 1.6 rejects",
			"DELWithCachedConfig": containerdDELReason,
			"CheckAfterAdd":       containerdCheckReason,
			"CheckAfterAddThick":  containerdCheckReason,
			"PinnedPauseImage":    "containerd 1.6 reports no image pinned, its sandbox image included: kubelet's image GC may remove it",
		},
	}
}

// Why TestRuntimes skips behaviours on containerd, 1.6 and 2.x.
const (
	containerdDELReason = "containerd's DEL uses the conf dir's current config, not the ADD's: " +
		"plexus never hears of it once the config changed (TestThickGCCollectsLostSandbox)"
	containerdCheckReason = "containerd's CRI sends no CNI CHECK"
)
