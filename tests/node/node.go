// Package node runs a real Kubernetes node for tests: Debian's containerd
// 1.6, or containerd 2.x or CRI-O built by `make runtimes`
// (Options.Runtime), with Debian's runc, on its own socket, root and state
// directories, and kubelet (built by `make node-bins`, or KubeletEnv's)
// registered with a kubeenv control plane. The
// container runtime calls plexus exactly as it does in a cluster: the CNI
// config in containerd's conf_dir, the plugins in its bin_dir.
//
// Nothing system-wide is configured: containerd and kubelet get their own
// config files and directories under a scratch directory. What they change
// anyway (kubelet's sysctls and fixed directories, containerd's shim socket
// directory) is recorded before and put back after (host.go); kubelet runs
// without iptables in its PATH so it adds no chains; every process is
// stopped by its PID.
//
// StartControllers adds kube-controller-manager and kube-scheduler
// (controlplane.go), for what runs through controllers: the deploy/
// DaemonSets, which RenderDeploy renders as `kubectl apply -k` would and
// relocates onto the node's directories (deploy.go).
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	// ContainerdDebug runs the runtime at log level debug, whose lines time
	// each sandbox's CNI setup (SandboxCNITime).
	ContainerdDebug bool
	// Runtime is the container runtime. Empty: RuntimeEnv's, else
	// Containerd (runtime.go).
	Runtime Runtime
}

// Node is a running containerd plus kubelet.
type Node struct {
	t    testing.TB
	Name string
	// rt is the container runtime kubelet runs on.
	rt runtime
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
	containerd        *kubeenv.Process
	kubelet           *kubeenv.Process
	host              *hostState
	crdOnce           *sync.Once
}

// Binaries a node needs besides the control plane's: built into BinDir by
// `make node-bins`, and installed from Debian by `make node-deps`.
var (
	builtBins = []string{"crictl", "pause-image.tar"}
	hostBins  = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"}
)

// readyTimeout bounds waits for the node and its pods; they take seconds,
// the margin is for a loaded, shared CI machine.
const readyTimeout = 2 * time.Minute

// stopGrace is how long a daemon gets to exit after SIGTERM.
const stopGrace = 15 * time.Second

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
	rt, err := runtimeOf(opts)
	harness.Must(t, err)
	for _, b := range rt.bins() {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found in %s: run `make runtimes`", b, opts.BinDir))
		}
	}
	for _, b := range builtBins {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found in %s: run `make node-bins pause-image`", b, opts.BinDir))
		}
	}
	for _, b := range rt.hostBins() {
		if _, err := lookPath(b); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found: run `make node-deps`", b))
		}
	}

	if _, err := kubeletPath(opts.BinDir); err != nil {
		skipOrFail(t, err.Error())
	}

	dir, err := os.MkdirTemp("", "pxnode-")
	harness.Must(t, err)
	n := &Node{
		t: t, Name: opts.Name, rt: rt, Dir: dir, Env: env,
		ConfDir:      filepath.Join(dir, "net.d"),
		StaticPodDir: filepath.Join(dir, "manifests"),
		Socket:       filepath.Join(dir, string(rt.Name())+".sock"),
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
	harness.Must(t, rt.writeConfig(n))
	harness.Must(t, n.writeCrictlConfig())
	harness.Must(t, n.writeKubeletConfig())

	path, args, procEnv, err := rt.command(n, opts.ContainerdDebug)
	harness.Must(t, err)
	n.containerd = kubeenv.NewProcess(string(rt.Name()), path, filepath.Join(dir, "containerd.log"), args...)
	n.containerd.Env = append([]string{"PATH=" + pathEnv()}, procEnv...)
	n.StartContainerd()
	n.logRuntimeVersion()
	harness.Must(t, n.importPauseImage())

	kubelet, err := kubeletPath(opts.BinDir)
	harness.Must(t, err)
	n.kubelet = kubeenv.NewProcess("kubelet", kubelet, filepath.Join(dir, "kubelet.log"),
		"--config="+filepath.Join(dir, "kubelet.yaml"),
		"--kubeconfig="+n.Kubeconfig,
		"--root-dir="+filepath.Join(dir, "kubelet"),
		"--hostname-override="+n.Name,
		"--v=2",
	)
	n.kubelet.Env = []string{"PATH=" + pathWithout("iptables", "ip6tables")}
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

// pathEnv is PATH with the directories of every runtime's host binaries,
// so the runtime finds runc, its shim or conmon wherever they are.
func pathEnv() string {
	path := os.Getenv("PATH")
	for _, rt := range runtimes {
		for _, b := range rt.hostBins() {
			if p, err := lookPath(b); err == nil && !strings.Contains(":"+path+":", ":"+filepath.Dir(p)+":") {
				path += ":" + filepath.Dir(p)
			}
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
	harness.Must(n.t, n.containerd.Start())
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	for {
		if _, err := n.Crictl(ctx, "info"); err == nil {
			return
		}
		if err := n.containerd.ExitError(); err != nil {
			n.t.Fatal(err)
		}
		// containerd serves on without a plugin that failed to load.
		if strings.Contains(n.containerd.LogTail(200), `failed to load plugin io.containerd.grpc.v1.cri"`) {
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
	harness.Must(n.t, n.containerd.Stop(stopGrace))
}

// StartKubelet starts kubelet (again, after StopKubelet).
func (n *Node) StartKubelet() {
	n.t.Helper()
	harness.Must(n.t, n.kubelet.Start())
}

// StopKubelet stops kubelet; the pods keep running.
func (n *Node) StopKubelet() {
	n.t.Helper()
	harness.Must(n.t, n.kubelet.Stop(stopGrace))
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
	for _, p := range []*kubeenv.Process{n.containerd, n.kubelet} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s ---\n%s\n", filepath.Base(p.LogPath), p.LogTail(60))
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
	if err := n.kubelet.Stop(stopGrace); err != nil {
		errs = append(errs, err)
	}
	if n.containerd.Running() {
		// Through the CRI, so every sandbox gets its CNI DEL before its
		// namespace goes.
		if err := n.removeAllSandboxes(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.containerd.Stop(stopGrace); err != nil {
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

// killShims kills, by PID, the shims (or conmons) this node's runtime
// started that outlived it.
func (n *Node) killShims() []error {
	var errs []error
	for _, pid := range n.rt.monitorPIDs(n) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill shim %d: %w", pid, err))
		}
	}
	return errs
}

// procCmdline is a process's PID and its command line, NUL-separated.
type procCmdline struct {
	pid     int
	cmdline string
}

func procCmdlines() []procCmdline {
	entries, _ := os.ReadDir("/proc")
	var out []procCmdline
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil {
			out = append(out, procCmdline{pid, string(cmdline)})
		}
	}
	return out
}
