// Package node runs a real Kubernetes node for tests: Debian's containerd
// (with runc) on its own socket, root and state directories, and kubelet
// (built by `make node-bins`) registered with a kubeenv control plane. The
// container runtime calls plexus exactly as it does in a cluster: the CNI
// config in containerd's conf_dir, the plugins in its bin_dir.
//
// Nothing system-wide is configured: containerd and kubelet get their own
// config files and directories under a scratch directory. What they change
// anyway (kubelet's sysctls and fixed directories, containerd's shim socket
// directory) is recorded before and put back after (host.go); every process
// is stopped by its PID.
package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// Options configures Start.
type Options struct {
	// Name is the node's name (kubelet's --hostname-override); required,
	// fixed per test so a failure names the node it ran on.
	Name string
	// BinDir holds kubelet and crictl. Empty: kubeenv.DefaultBinDir().
	BinDir string
	// CNIBinDir is containerd's CNI bin_dir. Empty: harness.BinDir
	// (plexus, plexus-shim, the reference plugins and the tests' tools).
	CNIBinDir string
}

// Node is a running containerd plus kubelet.
type Node struct {
	t    testing.TB
	Name string
	// Dir is the node's scratch directory (short: unix socket paths are
	// limited to 108 bytes), removed at the end.
	Dir string
	// ConfDir is containerd's CNI conf_dir; it holds one config at a time.
	ConfDir string
	// StaticPodDir is kubelet's staticPodPath.
	StaticPodDir string
	// Socket is containerd's (and so the CRI's) socket.
	Socket string
	// Kubeconfig is a cluster-admin kubeconfig file; kubelet uses it, and
	// so does plexus in InstallPlexus.
	Kubeconfig string

	Env    *kubeenv.Env
	Client kubernetes.Interface
	Dyn    dynamic.Interface

	binDir, cniBinDir string
	healthz           string // kubelet's healthz host:port
	kubeletAddr       string // kubelet's API host:port
	containerd        *proc
	kubelet           *proc
	host              *hostState
	crdOnce           *sync.Once
}

// Binaries a node needs besides the control plane's: built into BinDir by
// `make node-bins`, and installed from Debian by `make node-deps`.
var (
	builtBins = []string{"kubelet", "crictl"}
	hostBins  = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"}
)

// readyTimeout bounds waits for the node and its pods; they take seconds,
// the margin is for a loaded, shared CI machine.
const readyTimeout = 2 * time.Minute

// Start starts a node for t on env's control plane and stops it when t
// ends: kubelet first, then every sandbox left is removed through the CRI
// (so CNI DEL runs for it), then containerd and its shims; the host is put
// back as it was. The node becomes Ready once a CNI config is installed
// (InstallPlexus, InstallDefault).
//
// It skips t when a binary is missing and PLEXUS_E2E is not "1".
func Start(t testing.TB, env *kubeenv.Env, opts Options) *Node {
	t.Helper()
	if opts.Name == "" {
		t.Fatal("node.Start: Options.Name is required")
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "a node needs root")
	}
	if opts.BinDir == "" {
		d, err := kubeenv.DefaultBinDir()
		harness.Must(t, err)
		opts.BinDir = d
	}
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = harness.BinDir
	}
	for _, b := range builtBins {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found in %s: run `make node-bins`", b, opts.BinDir))
		}
	}
	for _, b := range hostBins {
		if _, err := lookPath(b); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found: run `make node-deps`", b))
		}
	}

	dir, err := os.MkdirTemp("", "pxnode-")
	harness.Must(t, err)
	n := &Node{
		t: t, Name: opts.Name, Dir: dir, Env: env,
		ConfDir:      filepath.Join(dir, "net.d"),
		StaticPodDir: filepath.Join(dir, "manifests"),
		Socket:       filepath.Join(dir, "containerd.sock"),
		Kubeconfig:   filepath.Join(dir, "admin.kubeconfig"),
		binDir:       opts.BinDir,
		crdOnce:      new(sync.Once),
		cniBinDir:    opts.CNIBinDir,
	}
	if n.host, err = recordHost(); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(n.cleanup)
	for _, d := range []string{n.ConfDir, n.StaticPodDir} {
		harness.Must(t, os.MkdirAll(d, 0o755))
	}
	if n.Client, err = kubernetes.NewForConfig(env.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	if n.Dyn, err = dynamic.NewForConfig(env.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	harness.Must(t, env.Kubeconfig(n.Kubeconfig, env.AdminConfig()))
	harness.Must(t, n.writeContainerdConfig())
	harness.Must(t, n.writeCrictlConfig())
	harness.Must(t, n.writeKubeletConfig())

	n.containerd = newProc("containerd", mustLookPath(t, "containerd"), filepath.Join(dir, "containerd.log"),
		"--config", filepath.Join(dir, "containerd.toml"))
	n.containerd.env = []string{"PATH=" + pathEnv()}
	n.StartContainerd()
	harness.Must(t, n.importPauseImage())

	n.kubelet = newProc("kubelet", filepath.Join(opts.BinDir, "kubelet"), filepath.Join(dir, "kubelet.log"),
		"--config="+filepath.Join(dir, "kubelet.yaml"),
		"--kubeconfig="+n.Kubeconfig,
		"--root-dir="+filepath.Join(dir, "kubelet"),
		"--hostname-override="+n.Name,
		"--v=2",
	)
	n.kubelet.env = []string{"PATH=" + pathWithout("iptables", "ip6tables")}
	n.StartKubelet()
	return n
}

// With is the node for a subtest: its helpers report to t. The node is
// still stopped when the test that started it ends.
func (n *Node) With(t testing.TB) *Node {
	c := *n
	c.t = t
	return &c
}

func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(kubeenv.E2EEnv) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", why, kubeenv.E2EEnv)
	}
	t.Skipf("%s (set %s=1 to make this a failure)", why, kubeenv.E2EEnv)
}

// lookPath is exec.LookPath that also searches the sbin directories, where
// Debian installs runc, for users whose PATH lacks them.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}

func mustLookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := lookPath(name)
	harness.Must(t, err)
	return p
}

// pathEnv is PATH with the directories of the host binaries, so containerd
// finds runc and its shim wherever they are.
func pathEnv() string {
	path := os.Getenv("PATH")
	for _, b := range hostBins {
		if p, err := lookPath(b); err == nil && !strings.Contains(":"+path+":", ":"+filepath.Dir(p)+":") {
			path += ":" + filepath.Dir(p)
		}
	}
	return path
}

// pathWithout is PATH without the directories holding any of cmds. kubelet
// gets it without iptables: with iptables it creates chains (KUBE-FIREWALL
// with jumps from INPUT and OUTPUT, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT)
// that would outlive it on the host, and it needs none of them itself. The
// CNI plugins (portmap) get iptables through containerd's PATH.
func pathWithout(cmds ...string) string {
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		has := false
		for _, c := range cmds {
			if _, err := os.Stat(filepath.Join(d, c)); err == nil {
				has = true
			}
		}
		if !has {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// StartContainerd starts containerd (again, after StopContainerd) and waits
// until its CRI answers.
func (n *Node) StartContainerd() {
	n.t.Helper()
	harness.Must(n.t, n.containerd.start())
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	for {
		if _, err := n.Crictl(ctx, "info"); err == nil {
			return
		}
		if err := n.containerd.exitError(); err != nil {
			n.t.Fatal(err)
		}
		// containerd serves on without a plugin that failed to load.
		if strings.Contains(n.containerd.logTail(200), `failed to load plugin io.containerd.grpc.v1.cri"`) {
			n.t.Fatal("containerd's CRI plugin failed to load")
		}
		if ctx.Err() != nil {
			n.t.Fatalf("containerd's CRI did not answer within %s", readyTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StopContainerd stops containerd; its shims, and so the pods, keep running.
func (n *Node) StopContainerd() {
	n.t.Helper()
	harness.Must(n.t, n.containerd.stop())
}

// StartKubelet starts kubelet (again, after StopKubelet).
func (n *Node) StartKubelet() {
	n.t.Helper()
	harness.Must(n.t, n.kubelet.start())
}

// StopKubelet stops kubelet; the pods keep running.
func (n *Node) StopKubelet() {
	n.t.Helper()
	harness.Must(n.t, n.kubelet.stop())
}

// WaitReady waits until kubelet answers on /healthz and the node's Ready
// condition is True.
func (n *Node) WaitReady() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	var last string
	for {
		last = n.readiness(ctx)
		if last == "" {
			return
		}
		if err := n.kubelet.exitError(); err != nil {
			n.t.Fatal(err)
		}
		if ctx.Err() != nil {
			n.t.Fatalf("node %s not Ready within %s: %s", n.Name, readyTimeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readiness is "" when the node is ready, else what is not.
func (n *Node) readiness(ctx context.Context) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.healthz+"/healthz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "kubelet /healthz: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "kubelet /healthz: " + resp.Status
	}
	node, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
		}
	}
	return "no Ready condition"
}

// KubeletMetric is the sum of the samples of a metric on kubelet's
// /metrics whose line contains every filter.
func (n *Node) KubeletMetric(ctx context.Context, name string, filters ...string) (float64, error) {
	// kubelet serves its API with a certificate it signed itself.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.kubeletAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("kubelet /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("kubelet /metrics: %s %v", resp.Status, err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && strings.Contains(line, f)
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); ok && err == nil {
			sum += v
		}
	}
	return sum, nil
}

// WaitPodsSynced waits until the running kubelet has synced pods pods
// (kubelet_pod_worker_duration_seconds counts each sync; a restarted
// kubelet starts from zero).
func (n *Node) WaitPodsSynced(pods int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	for {
		got, err := n.KubeletMetric(ctx, "kubelet_pod_worker_duration_seconds_count")
		if err == nil && got >= float64(pods) {
			return
		}
		if ctx.Err() != nil {
			n.t.Fatalf("kubelet synced %v pods within %s, want %d (%v)", got, readyTimeout, pods, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Crictl runs crictl against the node's containerd.
func (n *Node) Crictl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.binDir, "crictl"),
		append([]string{"--config", filepath.Join(n.Dir, "crictl.yaml")}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return string(out), fmt.Errorf("crictl %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Logs is the end of containerd's and kubelet's logs, for failure messages.
func (n *Node) Logs() string {
	var b strings.Builder
	for _, p := range []*proc{n.containerd, n.kubelet} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s ---\n%s\n", filepath.Base(p.logPath), p.logTail(60))
		}
	}
	return b.String()
}

func (n *Node) cleanup() {
	t := n.t
	if t.Failed() {
		t.Logf("node %s: the end of its logs (kept in %s while the test runs):\n%s", n.Name, n.Dir, n.Logs())
	}
	var errs []error
	if err := n.kubelet.stop(); err != nil {
		errs = append(errs, err)
	}
	if n.containerd.running() {
		// Through the CRI, so every sandbox gets its CNI DEL before its
		// namespace goes.
		if err := n.removeAllSandboxes(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.containerd.stop(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, n.killShims()...)
	if err := unmountUnder(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := n.host.restore(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove node directory: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("stop node %s: %v", n.Name, err)
	}
}

// Reset removes every pod from the node: the static pod manifests, the
// pods bound to it in the API (at once, without grace), then every sandbox
// through the CRI, so each gets its CNI DELs. Errors are reported, not
// fatal: it runs in cleanups.
func (n *Node) Reset() {
	var errs []error
	entries, _ := os.ReadDir(n.StaticPodDir)
	for _, e := range entries {
		errs = append(errs, os.Remove(filepath.Join(n.StaticPodDir, e.Name())))
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	pods, err := n.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String(),
	})
	errs = append(errs, err)
	if err == nil {
		zero := int64(0)
		for _, p := range pods.Items {
			err := n.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, n.removeAllSandboxes())
	if err := errors.Join(errs...); err != nil {
		n.t.Errorf("reset node %s: %v", n.Name, err)
	}
}

// removeAllSandboxes stops and removes every sandbox through the CRI. A
// sandbox gone meanwhile (kubelet removing it too) is fine; one created
// meanwhile (kubelet still retrying a pod) is removed in a later round.
func (n *Node) removeAllSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var errs []error
	for range 5 {
		out, err := n.Crictl(ctx, "pods", "-q")
		if err != nil {
			return err
		}
		ids := strings.Fields(out)
		if len(ids) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, id := range ids {
			for _, verb := range []string{"stopp", "rmp"} {
				if _, err := n.Crictl(ctx, verb, id); err != nil && !strings.Contains(err.Error(), "not found") {
					errs = append(errs, err)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("sandboxes keep appearing"))
	}
	return errors.Join(errs...)
}

// killShims kills, by PID, the runc shims this node's containerd started
// (they name its socket on their command line) that outlived it.
func (n *Node) killShims() []error {
	var errs []error
	for _, pid := range n.shimPIDs() {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill shim %d: %w", pid, err))
		}
	}
	return errs
}

func (n *Node) shimPIDs() []int {
	want := "\x00-address\x00" + n.Socket + "\x00"
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains("\x00"+string(cmdline), want) {
			out = append(out, pid)
		}
	}
	return out
}

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

// kubeletConfig is kubelet's configuration for this host: cgroup v1 with
// the cgroupfs driver and no per-QoS cgroups or node allocatable
// enforcement, swap allowed, no authentication of its own API (bound to
// loopback, so tests read its /metrics), eviction and image GC off (the host's disk is shared),
// everything it writes under its directories.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s
staticPodPath: %[2]s
fileCheckFrequency: 1s
address: 127.0.0.1
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[6]d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: %[4]s
volumePluginDir: %[5]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
`

func (n *Node) writeKubeletConfig() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	n.kubeletAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	healthz, err := freePort()
	if err != nil {
		return err
	}
	n.healthz = net.JoinHostPort("127.0.0.1", strconv.Itoa(healthz))
	conf := fmt.Sprintf(kubeletConfig, n.Socket, n.StaticPodDir, port,
		filepath.Join(n.Dir, "pod-logs"), filepath.Join(n.Dir, "volume-plugins"), healthz)
	return os.WriteFile(filepath.Join(n.Dir, "kubelet.yaml"), []byte(conf), 0o644)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	pauseArchiveOnce sync.Once
	pauseArchiveErr  error
)

// importPauseImage imports PauseImage into the node's containerd, in the
// CRI's namespace and unpacked for its snapshotter. The archive is packed
// once per test binary, beside the pause command built into
// harness.BinDir (removed with it).
func (n *Node) importPauseImage() error {
	archive := filepath.Join(harness.BinDir, "pause-image.tar")
	pauseArchiveOnce.Do(func() {
		pauseArchiveErr = writeImageArchive(archive, filepath.Join(harness.BinDir, "pause"), PauseImage)
	})
	if pauseArchiveErr != nil {
		return fmt.Errorf("pack the pause image: %w", pauseArchiveErr)
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
// CRI plugin reloads on every change of the directory) and waits until
// containerd uses the network named network and the node is Ready.
func (n *Node) writeCNIConfig(file string, data []byte, network string) {
	n.t.Helper()
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
		got, loaded, err := n.loadedNetwork(ctx)
		if err == nil && got == network && bytes.Equal(loaded, data) {
			break
		}
		if err == nil {
			last = fmt.Sprintf("it uses %q", got)
		}
		if ctx.Err() != nil {
			n.t.Fatalf("containerd did not load CNI network %q from %s (%s)", network, file, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.WaitReady()
}
