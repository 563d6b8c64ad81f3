package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
)

// Runtime names the container runtime a node runs under kubelet.
type Runtime string

const (
	// Containerd is Debian's containerd 1.6 with its runc shim
	// (containerd.go).
	Containerd Runtime = "containerd"
	// Containerd2 is containerd 2.x and its runc shim, built from the Go
	// module pinned in tools/containerd2 (`make runtimes`), on Debian's
	// runc (containerd2.go).
	Containerd2 Runtime = "containerd2"
	// CRIO is CRI-O, built from the Go module pinned in tools/crio with
	// its pinns and copyimg (`make runtimes`), on Debian's conmon and runc
	// (crio.go).
	CRIO Runtime = "crio"
)

// RuntimeEnv selects the runtime of nodes whose Options.Runtime is empty:
// "containerd" (the default), "containerd2" or "crio".
const RuntimeEnv = "PLEXUS_RUNTIME"

// runtime is what a node does through its container runtime that differs
// from one runtime to another: how it is configured and started, how it
// takes images, how the tests see what it did, and what the tests expect
// of it (traits). The rest of the node is the same on every runtime: they
// all serve the CRI, which kubelet and crictl use.
type runtime interface {
	// Name is the runtime's name (RuntimeEnv's values).
	Name() Runtime
	// bins are the runtime's binaries `make runtimes` builds into the
	// node's BinDir; hostBins those it needs from Debian (`make
	// node-deps`, `make runtime-deps`).
	bins() []string
	hostBins() []string
	// writeConfig writes the runtime's configuration under the node's
	// directory: everything it writes goes there too, its CNI directories
	// are the node's and its sandbox image is PauseImage.
	writeConfig(n *Node) error
	// command is the daemon, its arguments (debug: log level debug) and
	// its environment beyond PATH.
	command(n *Node, debug bool) (path string, args, env []string, err error)
	// importImage imports an image archive of tools/image, under name
	// ("": the archive's own), where the CRI finds it without a pull.
	importImage(n *Node, archive, name string) error
	// loadedNetwork is the pod network config the runtime uses now: its
	// name and its bytes as read from the conf dir.
	loadedNetwork(ctx context.Context, n *Node) (name string, data []byte, err error)
	// uses is how writeCNIConfig tells that the runtime loaded network
	// from file, whose content will be data; called before the write.
	uses(n *Node, file string, data []byte, network string) (cniUse, error)
	// netnsDir is where the runtime mounts sandbox network namespaces:
	// the paths it passes in CNI_NETNS.
	netnsDir(n *Node) string
	// cniSetupLines are what the runtime logs, at log level debug, before
	// and after the CNI setup of sandbox id of pod namespace/name, and
	// which lines are the sandbox's (SandboxCNITime).
	cniSetupLines(id, namespace, name string) (begin, end string, match func(string) bool)
	// monitorPIDs are the processes the runtime started per sandbox or
	// container (shims, conmon) outside its own process group: the node
	// kills those left after the runtime stopped.
	monitorPIDs(n *Node) []int
	// traits is what the tests expect of the runtime where runtimes
	// differ.
	traits() traits
}

// traits are what the node tests expect of a runtime where runtimes
// differ in what matters to plexus (TestRuntimes checks each).
type traits struct {
	// delAtRemoval: removing a stopped sandbox sends a second DEL,
	// without a netns (it is gone), after the one at stop.
	delAtRemoval bool
	// delFromCache: DEL uses the network config the ADD used, from the
	// runtime's libcni cache, not the conf dir's current one.
	delFromCache bool
	// gcAtStart: the runtime sends CNI GC (for a 1.1.0 config) when its
	// CNI plugin first becomes ready after a start.
	gcAtStart bool
	// infraContainer: every sandbox has a pause process (Sandbox.PID).
	infraContainer bool
	// mapsHostPorts: the runtime maps a pod's host ports itself and
	// passes no portMappings to CNI.
	mapsHostPorts bool
	// imageVolumes: the runtime mounts images as volumes, so extensions
	// are delivered as image volumes rather than init containers.
	imageVolumes bool
	// skips are the TestRuntimes behaviours that do not apply to the
	// runtime, each with the reason.
	skips map[string]string
}

// runtimes are the runtimes a node can run, Containerd first (the
// default).
var runtimes = []runtime{containerd{}, containerd2{}, crio{}}

// runtimeOf is opts' runtime, else RuntimeEnv's, else Containerd.
func runtimeOf(opts Options) (runtime, error) {
	name := opts.Runtime
	if name == "" {
		name = Runtime(os.Getenv(RuntimeEnv))
	}
	if name == "" {
		return runtimes[0], nil
	}
	for _, rt := range runtimes {
		if rt.Name() == name {
			return rt, nil
		}
	}
	return nil, fmt.Errorf("%s=%q: want %q, %q or %q", RuntimeEnv, name, Containerd, Containerd2, CRIO)
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

// importPauseImage imports PauseImage into the node's runtime from the
// archive `make pause-image` builds into the node's BinDir with the same
// builder as the plexus image (tools/image).
func (n *Node) importPauseImage() error {
	return n.rt.importImage(n, filepath.Join(n.binDir, "pause-image.tar"), PauseImage)
}

// ImportImage imports an image archive into the node's runtime, where
// pods run it without a pull: what `ctr -n k8s.io images import` or
// `podman load` does on a node.
func (n *Node) ImportImage(t testing.TB, archive string) {
	t.Helper()
	harness.Must(t, n.rt.importImage(n, archive, ""))
}

// loadedNetwork is the pod network config the runtime uses now (the one
// it attaches as eth0): its name and its bytes as read from conf_dir.
func (n *Node) loadedNetwork(ctx context.Context) (name string, data []byte, err error) {
	return n.rt.loadedNetwork(ctx, n)
}

// NetnsDir is where the runtime mounts sandbox network namespaces.
func (n *Node) NetnsDir() string { return n.rt.netnsDir(n) }

// writeCNIConfig makes file the only config in ConfDir (atomically: the
// runtime reloads on every change of the directory) and waits until the
// runtime uses the network named network and, while kubelet runs, the
// node is Ready.
func (n *Node) writeCNIConfig(file string, data []byte, network string) {
	n.t.Helper()
	uses, err := n.rt.uses(n, file, data, network)
	harness.Must(n.t, err)
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
			n.t.Fatalf("%s did not load CNI network %q from %s (%s)", n.rt.Name(), network, file, last)
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

// SandboxCNITime is how long the runtime's CNI setup of the sandbox id (of
// pod namespace/name) took, as the runtime's debug log times it: the
// installed network's ADD as the runtime waited for it.
func (n *Node) SandboxCNITime(id, namespace, name string) (time.Duration, error) {
	begin, end, match := n.rt.cniSetupLines(id, namespace, name)
	b, e, err := logSpan(n.containerd.LogPath, begin, end, match)
	if err != nil {
		return 0, err
	}
	if b.IsZero() || e.IsZero() {
		return 0, fmt.Errorf("%s's log has no CNI setup lines for sandbox %s of pod %s/%s (log level debug?)", n.rt.Name(), id, namespace, name)
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

// logTime is the time="..." of a runtime's log line (containerd and
// CRI-O both log with logrus).
func logTime(line string) (time.Time, error) {
	v, ok := strings.CutPrefix(line, `time="`)
	if !ok {
		return time.Time{}, fmt.Errorf("runtime log line without a time: %.80s", line)
	}
	v, _, _ = strings.Cut(v, `"`)
	return time.Parse(time.RFC3339Nano, v)
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
	n.t.Logf("node %s on %s:\n%s", n.Name, n.rt.Name(), strings.TrimSpace(out))
}
