package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// KubeletEnv names the kubelet binary nodes run instead of BinDir's (the
// release tools/k8s pins): `make test-skew` sets it to the oldest release
// plexus supports, built from tools/k8s-skew.
const KubeletEnv = "PLEXUS_KUBELET"

// kubeletPath is KubeletEnv's binary, else binDir's kubelet.
func kubeletPath(binDir string) (string, error) {
	p := os.Getenv(KubeletEnv)
	if p == "" {
		p = filepath.Join(binDir, "kubelet")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("kubelet %s not found (%s=%q): run `make node-bins` or `make skew-bins`", p, KubeletEnv, os.Getenv(KubeletEnv))
	}
	return p, nil
}

// KubeletMinor is the minor release of the kubelet the node registered
// with (its node's kubeletVersion).
func (n *Node) KubeletMinor(t testing.TB) int {
	t.Helper()
	node, err := n.Client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
	harness.Must(t, err)
	v, err := version.ParseSemantic(node.Status.NodeInfo.KubeletVersion)
	harness.Must(t, err)
	return int(v.Minor())
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
		if err := n.kubelet.ExitError(); err != nil {
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
	return harness.SumMetric(string(body), name, filters...), nil
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
	ports, err := kubeenv.FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
