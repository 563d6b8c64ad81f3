package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
)

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

func (n *Node) writeContainerdConfig() error {
	switch n.Runtime {
	case Containerd2:
		return n.writeContainerd2Config()
	case CRIO:
		return n.writeCRIOConfig()
	}
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

var (
	snapshotterOnce sync.Once
	snapshotterName string
	snapshotterErr  error
)

// snapshotter is overlayfs when the kernel mounts an overlay of dir's
// filesystem, else native (plain copies).
func snapshotter(dir string) (string, error) {
	snapshotterOnce.Do(func() {
		probe, err := os.MkdirTemp(dir, "overlay-probe-")
		if err != nil {
			snapshotterErr = err
			return
		}
		defer os.RemoveAll(probe)
		for _, d := range []string{"lower", "upper", "work", "merged"} {
			if err := os.Mkdir(filepath.Join(probe, d), 0o755); err != nil {
				snapshotterErr = err
				return
			}
		}
		merged := filepath.Join(probe, "merged")
		data := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s",
			filepath.Join(probe, "lower"), filepath.Join(probe, "upper"), filepath.Join(probe, "work"))
		if err := syscall.Mount("overlay", merged, "overlay", 0, data); err != nil {
			snapshotterName = "native"
			return
		}
		_ = syscall.Unmount(merged, 0)
		snapshotterName = "overlayfs"
	})
	return snapshotterName, snapshotterErr
}

func (n *Node) writeCrictlConfig() error {
	ep := "unix://" + n.Socket
	conf := fmt.Sprintf("runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n", ep, ep)
	return os.WriteFile(filepath.Join(n.Dir, "crictl.yaml"), []byte(conf), 0o644)
}

// PauseImage is the image of every sandbox (containerd's sandbox_image) and
// of the tests' containers: the name `make pause-image` gives it (mk/image.mk
// PAUSE_IMAGE). It is imported, never pulled: pods use imagePullPolicy Never
// and there is no registry.
const PauseImage = "localhost/plexus/pause:3.10"

// importPauseImage imports PauseImage into the node's containerd, in the
// CRI's namespace and unpacked for its snapshotter, from the archive `make
// pause-image` builds into the node's BinDir with the same builder as the
// plexus image (tools/image).
func (n *Node) importPauseImage() error {
	archive := filepath.Join(n.binDir, "pause-image.tar")
	if n.Runtime == CRIO {
		return n.crioImportImage(archive, PauseImage)
	}
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

// loadedNetwork is the pod network config containerd uses now (the one it
// attaches as eth0): its name and its bytes as read from conf_dir.
func (n *Node) loadedNetwork(ctx context.Context) (name string, data []byte, err error) {
	if n.Runtime == CRIO {
		return n.crioLoadedNetwork()
	}
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

// writeCNIConfig makes file the only config in ConfDir (atomically: the
// runtime reloads on every change of the directory) and waits until the
// runtime uses the network named network and, while kubelet runs, the
// node is Ready.
func (n *Node) writeCNIConfig(file string, data []byte, network string) {
	n.t.Helper()
	uses := n.containerdUses(data, network)
	if n.Runtime == CRIO {
		uses = n.crioUses(file, network)
	}
	tmp := filepath.Join(n.ConfDir, ".tmp-"+file)
	harness.Must(n.t, os.WriteFile(tmp, data, 0o644))
	harness.Must(n.t, os.Rename(tmp, filepath.Join(n.ConfDir, file)))
	entries, err := os.ReadDir(n.ConfDir)
	harness.Must(n.t, err)
	for _, e := range entries {
		if e.Name() != file {
			harness.Must(n.t, os.Remove(filepath.Join(n.ConfDir, e.Name())))
		}
	}
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	last := "no answer"
	for {
		ok, what := uses(ctx)
		if ok {
			break
		}
		if what != "" {
			last = what
		}
		if ctx.Err() != nil {
			n.t.Fatalf("%s did not load CNI network %q from %s (%s)", n.Runtime, network, file, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n.kubelet.Running() {
		n.WaitReady()
	}
}

// cniUse tells whether the runtime uses the network writeCNIConfig waits
// for and, when it can tell, what it uses instead.
type cniUse func(ctx context.Context) (ok bool, instead string)

// containerdUses asks containerd's CRI status for the loaded network.
func (n *Node) containerdUses(data []byte, network string) cniUse {
	return func(ctx context.Context) (bool, string) {
		got, loaded, err := n.loadedNetwork(ctx)
		if err != nil {
			return false, ""
		}
		return got == network && bytes.Equal(loaded, data), fmt.Sprintf("it uses %q", got)
	}
}

// SandboxCNITime is how long the runtime's CNI setup of the sandbox id (of
// pod namespace/name) took, as the runtime's debug log times it: the
// installed network's ADD as the runtime waited for it. containerd logs
// "begin cni setup" and "cni result" for the sandbox (loopback's ADD
// within); CRI-O logs "Adding pod NS_NAME to CNI network" before the ADD
// and "Checking pod NS_NAME for CNI network" before the CHECK it runs
// right after (it brings loopback up itself, without a plugin).
func (n *Node) SandboxCNITime(id, namespace, name string) (time.Duration, error) {
	begin, end := `msg="begin cni setup"`, `msg="cni result:`
	match := func(line string) bool { return strings.HasSuffix(line, "podsandboxid="+id) }
	if n.Runtime == CRIO {
		pod := namespace + "_" + name
		begin, end = `msg="Adding pod `+pod+` to CNI network `, `msg="Checking pod `+pod+` for CNI network `
		match = func(string) bool { return true }
	}
	b, e, err := logSpan(n.containerd.LogPath, begin, end, match)
	if err != nil {
		return 0, err
	}
	if b.IsZero() || e.IsZero() {
		return 0, fmt.Errorf("%s's log has no CNI setup lines for sandbox %s of pod %s/%s (log level debug?)", n.Runtime, id, namespace, name)
	}
	return e.Sub(b), nil
}

// logSpan is the time of the last line of the log at path holding begin
// and of the last holding end, among the lines match accepts.
func logSpan(path, begin, end string, match func(string) bool) (b, e time.Time, err error) {
	f, err := os.Open(path)
	if err != nil {
		return b, e, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !match(line) {
			continue
		}
		switch {
		case strings.Contains(line, begin):
			b, err = logTime(line)
		case strings.Contains(line, end):
			e, err = logTime(line)
		}
		if err != nil {
			return b, e, err
		}
	}
	return b, e, sc.Err()
}

// logTime is the time="..." of a containerd log line.
func logTime(line string) (time.Time, error) {
	v, ok := strings.CutPrefix(line, `time="`)
	if !ok {
		return time.Time{}, fmt.Errorf("containerd log line without a time: %.80s", line)
	}
	v, _, _ = strings.Cut(v, `"`)
	return time.Parse(time.RFC3339Nano, v)
}
