package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// Multus (the reference implementation) on this node, for the benchmarks
// to compare plexus with: built by `make multus` (mk/multus.mk, its Go
// module pinned in tools/multus) into $PLEXUS_BIN/multus, and configured
// as its deployments/ manifests do, relocated onto the node's directories
// as RenderDeploy relocates plexus's: the thin plugin's config is what its
// thin entrypoint generates (the default network as its only delegate, a
// kubeconfig of the multus ServiceAccount); thick mode is multus-daemon
// with the manifest's daemon config, run on the host as a DaemonSet pod in
// the host's namespaces would run, its client the in-cluster one, and
// multus-shim as the CNI plugin.

// MultusNetwork is the network name Multus's generated configs carry.
const MultusNetwork = "multus-cni-network"

// multusBins are the binaries `make multus` builds; the CNI plugins among
// them are linked into containerd's bin_dir by MultusBinDir.
var multusBins = []string{"multus", "multus-shim", "multus-daemon"}

// multusDir is where `make multus` puts the binaries: $PLEXUS_BIN/multus.
func multusDir() string {
	bin := os.Getenv("PLEXUS_BIN")
	if bin == "" {
		return ""
	}
	return filepath.Join(bin, "multus")
}

// MultusBuilt reports why Multus cannot run here ("" when it can).
func MultusBuilt() string {
	if multusDir() == "" {
		return "PLEXUS_BIN is not set: Multus is looked for in $PLEXUS_BIN/multus"
	}
	for _, b := range multusBins {
		if _, err := os.Stat(filepath.Join(multusDir(), b)); err != nil {
			return fmt.Sprintf("%s not built (make multus): %v", b, err)
		}
	}
	return ""
}

// multusPlugins maps the CNI plugin names Multus installs into the node's
// bin_dir to the built binaries.
func multusPlugins() map[string]string {
	dir := multusDir()
	return map[string]string{"multus": filepath.Join(dir, "multus"), "multus-shim": filepath.Join(dir, "multus-shim")}
}

// multusRBAC creates what Multus's thick manifest grants its
// ServiceAccount kube-system/multus (the thin manifest's ClusterRole is the
// same without pods list and watch): every verb on the NAD group, get,
// list, update and watch on pods and pods/status, event writes.
func (n *Node) multusRBAC(ctx context.Context) error {
	cs := n.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "multus", Namespace: "kube-system"}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "multus"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "list", "update", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "multus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "multus"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "multus", Namespace: "kube-system"}},
	}
	_, err := cs.CoreV1().ServiceAccounts("kube-system").Create(ctx, sa, metav1.CreateOptions{})
	if err = ignoreExists(err); err != nil {
		return fmt.Errorf("ServiceAccount kube-system/multus: %w", err)
	}
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if err = ignoreExists(err); err != nil {
		return fmt.Errorf("ClusterRole multus: %w", err)
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err = ignoreExists(err); err != nil {
		return fmt.Errorf("ClusterRoleBinding multus: %w", err)
	}
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// MultusKubeconfig writes a kubeconfig of the multus ServiceAccount (its
// RBAC created first) into dir, as the thin entrypoint writes
// multus.kubeconfig from the pod's token, and returns its path.
func (n *Node) MultusKubeconfig(t testing.TB, dir string) string {
	t.Helper()
	harness.Must(t, n.multusRBAC(t.Context()))
	cfg, err := n.Env.ServiceAccountConfig(t.Context(), "kube-system", "multus")
	harness.Must(t, err)
	path := filepath.Join(dir, "multus.kubeconfig")
	harness.Must(t, n.Env.Kubeconfig(path, cfg))
	return path
}

// MultusThinConfig is the config Multus's thin entrypoint generates for w's
// default network: the network itself as the only delegate, its
// capabilities, the kubeconfig; the cache directory (cniDir) and binDir
// relocated onto the node's.
func (n *Node) MultusThinConfig(w *harness.World, kubeconfig, cacheDir string) []byte {
	n.t.Helper()
	data, err := os.ReadFile(w.Plexus["clusterNetwork"].(string))
	harness.Must(n.t, err)
	var delegate map[string]any
	harness.Must(n.t, json.Unmarshal(data, &delegate))
	out, err := json.MarshalIndent(map[string]any{
		"cniVersion":   CNIVersion,
		"name":         MultusNetwork,
		"type":         "multus",
		"capabilities": defaultCapabilities(n, w),
		"kubeconfig":   kubeconfig,
		"cniDir":       cacheDir,
		"binDir":       n.cniBinDir,
		"delegates":    []any{delegate},
	}, "", "  ")
	harness.Must(n.t, err)
	return out
}

// InstallMultusThin makes MultusThinConfig the node's CNI config.
func (n *Node) InstallMultusThin(w *harness.World, kubeconfig, cacheDir string) {
	n.t.Helper()
	n.installMultus(n.MultusThinConfig(w, kubeconfig, cacheDir))
}

// installMultus installs a Multus plugin config as a conflist of that one
// plugin: what the runtime makes of the .conf Multus writes, in the form
// writeCNIConfig can compare with what the runtime loaded.
func (n *Node) installMultus(conf []byte) {
	n.t.Helper()
	var plugin map[string]any
	harness.Must(n.t, json.Unmarshal(conf, &plugin))
	delete(plugin, "name")
	delete(plugin, "cniVersion")
	data, err := json.MarshalIndent(map[string]any{"cniVersion": CNIVersion, "name": MultusNetwork, "plugins": []any{plugin}}, "", "  ")
	harness.Must(n.t, err)
	n.writeCNIConfig("00-multus.conflist", data, MultusNetwork)
}

// MultusDaemon is multus-daemon running on the host.
type MultusDaemon struct {
	proc *kubeenv.Process
	// ShimConfig is the multus-shim config it generated, which
	// InstallMultusThick installs.
	ShimConfig []byte
	LogPath    string
}

// Pid is multus-daemon's process ID (0 once it exited).
func (d *MultusDaemon) Pid() int { return d.proc.Pid() }

// Running reports whether multus-daemon still runs.
func (d *MultusDaemon) Running() bool { return d.proc.Running() }

// secretsDir is where client-go's in-cluster config reads the pod's
// ServiceAccount token and CA, a path it does not let one change.
const secretsDir = "/run/secrets/kubernetes.io/serviceaccount"

// StartMultusDaemon starts multus-daemon with the thick manifest's daemon
// config: multusConfigFile "auto", which generates the multus-shim config
// from the primary network's config found in multusAutoconfigDir, at
// logLevel error (the manifest's "verbose" is a quickstart's; errors only
// cost when there are some). Relocated: multusAutoconfigDir holds a copy of w's
// default network, and the generated config goes to dir/net.d, not to the
// node's conf_dir, which the harness keeps to one config
// (InstallMultusThick installs it); the socket and cache directories are
// in dir. Its client is client-go's in-cluster one, as in the DaemonSet:
// the multus ServiceAccount's token and the CA under secretsDir, which is
// created for it and removed when t ends, and the API server as
// KUBERNETES_SERVICE_HOST and _PORT. It is stopped when t ends.
func (n *Node) StartMultusDaemon(t testing.TB, w *harness.World, dir string) *MultusDaemon {
	t.Helper()
	harness.Must(t, n.multusRBAC(t.Context()))
	n.multusSecrets(t)
	socketDir, netd, primary := filepath.Join(dir, "run"), filepath.Join(dir, "net.d"), filepath.Join(dir, "primary")
	for _, d := range []string{socketDir, netd, primary} {
		harness.Must(t, os.MkdirAll(d, 0o755))
	}
	def, err := os.ReadFile(w.Plexus["clusterNetwork"].(string))
	harness.Must(t, err)
	harness.Must(t, os.WriteFile(filepath.Join(primary, "10-default.conflist"), def, 0o644))
	conf, err := json.MarshalIndent(map[string]any{
		"cniVersion":          CNIVersion,
		"logToStderr":         true,
		"logLevel":            "error",
		"cniConfigDir":        netd,
		"multusAutoconfigDir": primary,
		"multusConfigFile":    "auto",
		"socketDir":           socketDir,
		"daemonSocketDir":     socketDir,
		"cniDir":              filepath.Join(dir, "cache"),
		"binDir":              n.cniBinDir,
	}, "", "  ")
	harness.Must(t, err)
	confPath := filepath.Join(dir, "daemon-config.json")
	harness.Must(t, os.WriteFile(confPath, conf, 0o644))
	api, err := url.Parse(n.Env.Host())
	harness.Must(t, err)
	host, port, err := net.SplitHostPort(api.Host)
	harness.Must(t, err)
	p := kubeenv.NewProcess("multus-daemon", filepath.Join(multusDir(), "multus-daemon"),
		filepath.Join(dir, "multus-daemon.log"), "-config", confPath)
	p.Env = []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port, "MULTUS_NODE_NAME=" + n.Name}
	harness.Must(t, p.Start())
	t.Cleanup(func() {
		_ = p.Stop(stopGrace)
		if t.Failed() {
			log, _ := os.ReadFile(p.LogPath)
			t.Logf("multus-daemon's log:\n%s", log[max(0, len(log)-8192):])
		}
	})
	sock, generated := filepath.Join(socketDir, "multus.sock"), filepath.Join(netd, "00-multus.conf")
	deadline := time.Now().Add(readyTimeout)
	for {
		_, errSock := os.Stat(sock)
		shim, errConf := os.ReadFile(generated)
		if errSock == nil && errConf == nil && len(shim) > 0 {
			return &MultusDaemon{proc: p, ShimConfig: shim, LogPath: p.LogPath}
		}
		if !p.Running() || time.Now().After(deadline) {
			log, _ := os.ReadFile(p.LogPath)
			t.Fatalf("multus-daemon did not create %s and %s:\n%s", sock, generated, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// multusSecrets writes the multus ServiceAccount's token, the cluster's CA
// and the namespace into secretsDir, which must not exist yet, and
// removes what it created when t ends.
func (n *Node) multusSecrets(t testing.TB) {
	t.Helper()
	top := "/run/secrets"
	if _, err := os.Lstat(top); err == nil {
		return // written earlier in this run (or the host's own: left as is)
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	cfg, err := n.Env.ServiceAccountConfig(t.Context(), "kube-system", "multus")
	harness.Must(t, err)
	harness.Must(t, os.MkdirAll(secretsDir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	ca, err := os.ReadFile(n.Env.CAFile())
	harness.Must(t, err)
	for name, data := range map[string][]byte{"token": []byte(cfg.BearerToken), "ca.crt": ca, "namespace": []byte("kube-system")} {
		harness.Must(t, os.WriteFile(filepath.Join(secretsDir, name), data, 0o600))
	}
}

// InstallMultusThick makes d's shim config the node's CNI config.
func (n *Node) InstallMultusThick(d *MultusDaemon) {
	n.t.Helper()
	n.installMultus(d.ShimConfig)
}

// RSSMiB is a process's resident memory (VmRSS) in MiB; 0 when it is not
// running.
func RSSMiB(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	return float64(statusKiB(data, "VmRSS:")) / 1024
}

// apiRequests is the growth of kube-apiserver's request counts (verb and
// resource, as kubeenv.Env.RequestCounts keys them) while call runs, once
// they stop growing: writes a plugin makes after it answered (plexusd's
// status PATCH) are counted too. Requests that are no plugin's are left
// out: non-resource ones (the scrape itself), leases and the OpenAPI
// documents (the control plane's own). The node's kubelet must be
// stopped: its requests would count too.
func (n *Node) apiRequests(t testing.TB, call func()) map[string]float64 {
	t.Helper()
	before, err := n.Env.RequestCounts(t.Context())
	harness.Must(t, err)
	call()
	var after map[string]float64
	for range 20 {
		time.Sleep(300 * time.Millisecond)
		next, err := n.Env.RequestCounts(t.Context())
		harness.Must(t, err)
		if after != nil && sameCounts(after, next) {
			break
		}
		after = next
	}
	out := map[string]float64{}
	for k, v := range after {
		verb, resource, ok := strings.Cut(k, " ")
		if !ok || strings.HasPrefix(resource, "leases") || strings.HasPrefix(resource, "openapi") || verb == "WATCH" {
			continue
		}
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func sameCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sumCounts(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
