package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// Controllers are kube-controller-manager and kube-scheduler (built by
// `make node-bins`) on the node's control plane, for tests of what a
// cluster runs through controllers: DaemonSets (the DaemonSet controller
// creates a pod per node, the default scheduler binds it), ServiceAccount
// token volumes (the root CA ConfigMap they need), cascading deletion.
type Controllers struct {
	n         *Node
	dir       string
	manager   *kubeenv.Process
	scheduler *kubeenv.Process
}

// controllerList is what kube-controller-manager runs: the DaemonSet
// controller and what DaemonSet pods and their removal need
// (serviceaccount: each namespace's "default" ServiceAccount;
// serviceaccount-token: legacy token Secrets, harmless;
// root-ca-cert-publisher: kube-root-ca.crt, without which no pod with a
// ServiceAccount token volume starts; garbagecollector: a deleted
// DaemonSet's pods and ControllerRevisions go too).
const controllerList = "daemonset,serviceaccount,serviceaccount-token,root-ca-cert-publisher,garbagecollector"

// StartControllers starts kube-controller-manager and kube-scheduler
// against the node's control plane, each on its own loopback port and
// certificate directory under the node's directory, with the node's admin
// kubeconfig. They are stopped by PID when t ends (before the node is:
// cleanups run last in, first out), and their logs' ends are shown if t
// failed.
func (n *Node) StartControllers(t testing.TB) *Controllers {
	t.Helper()
	for _, b := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(n.binDir, b)); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found in %s: run `make node-bins`", b, n.binDir))
		}
	}
	c := &Controllers{n: n, dir: filepath.Join(n.Dir, "controllers")}
	harness.Must(t, os.MkdirAll(c.dir, 0o755))
	ports := make([]int, 2)
	for i := range ports {
		p, err := freePort()
		harness.Must(t, err)
		ports[i] = p
	}
	c.manager = kubeenv.NewProcess("kube-controller-manager", filepath.Join(n.binDir, "kube-controller-manager"),
		filepath.Join(c.dir, "kube-controller-manager.log"),
		"--kubeconfig="+n.Kubeconfig,
		"--authentication-kubeconfig="+n.Kubeconfig,
		"--authorization-kubeconfig="+n.Kubeconfig,
		"--controllers="+controllerList,
		"--root-ca-file="+n.Env.CAFile(),
		"--service-account-private-key-file="+n.Env.ServiceAccountKeyFile(),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[0]),
		"--cert-dir="+filepath.Join(c.dir, "kcm-certs"),
		// Controllers react within a second in a test, not after the
		// default resync and backoff periods.
		"--min-resync-period=10s",
		"--v=2",
	)
	c.scheduler = kubeenv.NewProcess("kube-scheduler", filepath.Join(n.binDir, "kube-scheduler"),
		filepath.Join(c.dir, "kube-scheduler.log"),
		"--kubeconfig="+n.Kubeconfig,
		"--authentication-kubeconfig="+n.Kubeconfig,
		"--authorization-kubeconfig="+n.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[1]),
		"--cert-dir="+filepath.Join(c.dir, "scheduler-certs"),
		"--v=2",
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controllers: the end of their logs:\n%s", c.Logs())
		}
		var errs []error
		for _, p := range []*kubeenv.Process{c.scheduler, c.manager} {
			errs = append(errs, p.Stop(stopGrace))
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("stop controllers: %v", err)
		}
	})
	harness.Must(t, c.manager.Start())
	harness.Must(t, c.scheduler.Start())
	c.waitHealthy(t, ports)
	return c
}

// waitHealthy waits until both answer /healthz ok on their secure ports
// (anonymous /healthz is allowed by both by default).
func (c *Controllers) waitHealthy(t testing.TB, ports []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	for i, p := range []*kubeenv.Process{c.manager, c.scheduler} {
		url := "https://127.0.0.1:" + strconv.Itoa(ports[i]) + "/healthz"
		for {
			err := httpsOK(ctx, url)
			if err == nil {
				break
			}
			if e := p.ExitError(); e != nil {
				t.Fatalf("%v\n%s", e, p.LogTail(40))
			}
			if ctx.Err() != nil {
				t.Fatalf("%s not healthy within %s: %v\n%s", p.Name, readyTimeout, err, p.LogTail(40))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// Logs is the end of both logs, for failure messages.
func (c *Controllers) Logs() string {
	var b strings.Builder
	for _, p := range []*kubeenv.Process{c.manager, c.scheduler} {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", filepath.Base(p.LogPath), p.LogTail(60))
	}
	return b.String()
}

// httpsOK GETs url, trusting any certificate (the components serve
// self-signed ones from their cert dirs), and wants 200.
func httpsOK(ctx context.Context, url string) error {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
