// Package kubeenv runs a real, throwaway Kubernetes control plane (etcd and
// kube-apiserver, built by `make k8s-bins`) for end-to-end tests.
//
// The API server runs with real authentication (x509 client certificates and
// service-account tokens) and real authorization (RBAC), so tests see the
// same answers, including Forbidden, that plexus gets in a cluster.
//
// There is no controller-manager, scheduler or kubelet: tests create Pods with
// spec.nodeName already set, and nothing runs them. Because the
// ServiceAccount admission plugin stays enabled (pods get
// serviceAccountName=default and a projected token volume, as in a real
// cluster) but no controller creates the "default" ServiceAccount,
// CreateNamespace creates it along with the namespace, and Start creates it
// in the "default" namespace.
//
// Binaries are looked up in $PLEXUS_BIN, else <module root>/bin. ForTest
// skips when they are missing unless PLEXUS_E2E=1, which makes that a failure.
package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options configures Start.
type Options struct {
	// BinDir holds the kube-apiserver and etcd executables. Empty means
	// DefaultBinDir().
	BinDir string
	// Dir is where the environment's scratch directory is created (it gets
	// its own subdirectory, removed by Stop). Empty means os.TempDir().
	Dir string
}

// Env is a running etcd plus kube-apiserver.
type Env struct {
	dir  string // scratch directory, removed by Stop
	pki  *pki
	host string // https://127.0.0.1:port

	etcd, apiserver *Process
	etcdPorts       [2]int // client, peer
	apiserverPort   int
}

// startTimeout bounds Start when the caller's context has no deadline. Ready
// takes seconds; the margin is for loaded, shared CI machines.
const startTimeout = 3 * time.Minute

// stopGrace is how long a process gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// bindRetries is how often a start is retried when a randomly chosen port
// was taken between choosing it and the process binding it.
const bindRetries = 3

// Start launches etcd and kube-apiserver on free loopback ports and returns
// once /readyz answers ok. On error nothing is left running or on disk.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	etcdBin, apiserverBin := filepath.Join(binDir, "etcd"), filepath.Join(binDir, "kube-apiserver")
	for _, b := range []string{etcdBin, apiserverBin} {
		if err := checkExecutable(b); err != nil {
			return nil, err
		}
	}

	dir, err := os.MkdirTemp(opts.Dir, "kubeenv-")
	if err != nil {
		return nil, fmt.Errorf("create scratch directory: %w", err)
	}
	e := &Env{dir: dir}
	defer func() {
		if err != nil {
			if stopErr := e.Stop(); stopErr != nil {
				err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", stopErr))
			}
		}
	}()

	if e.pki, err = newPKI(dir); err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	if err := e.startEtcd(ctx, etcdBin); err != nil {
		return nil, err
	}
	if err := e.startAPIServer(ctx, apiserverBin); err != nil {
		return nil, err
	}
	if err := e.ensureDefaultServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		return nil, err
	}
	return e, nil
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("control-plane binary (build it with `make k8s-bins`): %w", err)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("control-plane binary %s is not executable", path)
	}
	return nil
}

func (e *Env) startEtcd(ctx context.Context, bin string) error {
	return startWithRetry(ctx, "etcd", func() (*Process, error) {
		ports, err := FreePorts(2)
		if err != nil {
			return nil, err
		}
		client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(e.dir, "etcd")
		// A retry must not find the half-initialised member of a failed try.
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, fmt.Errorf("reset etcd data directory: %w", err)
		}
		p, err := startProcess(bin, filepath.Join(e.dir, "etcd.log"),
			"--name=kubeenv",
			"--data-dir="+dataDir,
			"--listen-client-urls="+client,
			"--advertise-client-urls="+client,
			"--listen-peer-urls="+peer,
			"--initial-advertise-peer-urls="+peer,
			"--initial-cluster=kubeenv="+peer,
			"--initial-cluster-state=new",
			// The data is thrown away at Stop; fsync only costs time.
			"--unsafe-no-fsync",
		)
		if err != nil {
			return nil, err
		}
		e.etcd, e.etcdPorts = p, [2]int{ports[0], ports[1]}
		return p, waitReady(ctx, p, plainGetter(client+"/health"), `"health":"true"`)
	})
}

func (e *Env) startAPIServer(ctx context.Context, bin string) error {
	return startWithRetry(ctx, "kube-apiserver", func() (*Process, error) {
		ports, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		e.apiserverPort = ports[0]
		e.host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		p, err := startProcess(bin, filepath.Join(e.dir, "kube-apiserver.log"),
			"--etcd-servers=http://127.0.0.1:"+strconv.Itoa(e.etcdPorts[0]),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(ports[0]),
			"--cert-dir="+filepath.Join(e.dir, "apiserver-certs"),
			"--tls-cert-file="+e.pki.servingCertFile,
			"--tls-private-key-file="+e.pki.servingKeyFile,
			"--client-ca-file="+e.pki.caFile,
			// Node is what a real cluster runs in front of RBAC; it only
			// answers for system:node:* users, so it changes nothing for
			// the identities tests use.
			"--authorization-mode=Node,RBAC",
			"--anonymous-auth=false",
			"--service-account-issuer=https://kubeenv.invalid",
			"--service-account-key-file="+e.pki.saPubFile,
			"--service-account-signing-key-file="+e.pki.saKeyFile,
			"--service-cluster-ip-range=10.96.0.0/24",
			// The "kubernetes" Service's endpoints would have to be this
			// loopback address, which Endpoints validation rejects; no
			// test needs in-cluster discovery of the API server.
			"--endpoint-reconciler-type=none",
			"--allow-privileged=true",
			"--profiling=false",
		)
		if err != nil {
			return nil, err
		}
		e.apiserver = p
		client, err := rest.HTTPClientFor(e.AdminConfig())
		if err != nil {
			return p, fmt.Errorf("kube-apiserver client: %w", err)
		}
		return p, waitReady(ctx, p, func(ctx context.Context) (int, string, error) {
			return get(ctx, client, e.host+"/readyz")
		}, "ok")
	})
}

// ensureDefaultServiceAccount does what kube-controller-manager's
// serviceaccount controller would: without it, the ServiceAccount admission
// plugin rejects every pod in the namespace.
func (e *Env) ensureDefaultServiceAccount(ctx context.Context, namespace string) error {
	cs, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: namespace}}
	for {
		_, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsNotFound(err):
			// System namespaces ("default") are created by a post-start
			// hook that /readyz does not wait for.
		default:
			return fmt.Errorf("create ServiceAccount %s/default: %w", namespace, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create ServiceAccount %s/default: namespace never appeared: %w", namespace, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// CreateNamespace creates a namespace with the given labels and its
// "default" ServiceAccount, so pods can be created in it right away.
func (e *Env) CreateNamespace(ctx context.Context, name string, labels map[string]string) error {
	cs, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return e.ensureDefaultServiceAccount(ctx, name)
}

// Host is the API server's URL.
func (e *Env) Host() string { return e.host }

// Dir is the environment's scratch directory (logs, certificates, etcd data).
func (e *Env) Dir() string { return e.dir }

// Logs returns the last lines of both processes' logs, for failure messages.
func (e *Env) Logs() string {
	var b strings.Builder
	for _, p := range []*Process{e.etcd, e.apiserver} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s ---\n%s\n", filepath.Base(p.LogPath), p.LogTail(logTailLines))
		}
	}
	return b.String()
}

// Stop kills kube-apiserver, then etcd, waits for both to exit and removes
// the scratch directory. It is safe to call more than once.
func (e *Env) Stop() error {
	var errs []error
	// The API server first, so it does not spend its last moments logging
	// etcd connection errors.
	for _, p := range []*Process{e.apiserver, e.etcd} {
		if p != nil {
			if err := p.Stop(stopGrace); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if e.dir != "" {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove scratch directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// DefaultBinDir is $PLEXUS_BIN if set, else the bin directory at the root of
// the plexus module (where `make k8s-bins` puts the binaries), found by
// walking up from the working directory.
func DefaultBinDir() (string, error) {
	if d := os.Getenv("PLEXUS_BIN"); d != "" {
		return d, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("find bin directory: %w; set PLEXUS_BIN", err)
	}
	return filepath.Join(root, "bin"), nil
}

// moduleRoot is the directory of plexus's go.mod above the working
// directory (a test's package directory).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isPlexusModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no plexus go.mod above %s", wd)
		}
	}
}

func isPlexusModule(gomod string) bool {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "module github.com/plexus-cni/plexus" {
			return true
		}
	}
	return false
}

// startProcess starts bin, named for its file, logging to logPath; on error
// nothing runs.
func startProcess(bin, logPath string, args ...string) (*Process, error) {
	p := NewProcess(filepath.Base(bin), bin, logPath, args...)
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// startWithRetry runs start, retrying with fresh ports when the process died
// because a port it was given had been taken in the meantime.
func startWithRetry(ctx context.Context, name string, start func() (*Process, error)) error {
	for attempt := 1; ; attempt++ {
		p, err := start()
		if err == nil {
			return nil
		}
		if p == nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		logTail := p.LogTail(logTailLines)
		stopErr := p.Stop(stopGrace)
		if attempt < bindRetries && ctx.Err() == nil && strings.Contains(logTail, "address already in use") {
			continue
		}
		return errors.Join(
			fmt.Errorf("start %s: %w\n--- last lines of %s ---\n%s", name, err, p.LogPath, logTail),
			stopErr)
	}
}

// getter reports an HTTP status and body.
type getter func(ctx context.Context) (status int, body string, err error)

// waitReady polls check until it answers 200 with a body containing want,
// the process exits, or ctx ends.
func waitReady(ctx context.Context, p *Process, check getter, want string) error {
	var last string
	for {
		status, body, err := check(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case status == http.StatusOK && strings.Contains(body, want):
			return nil
		default:
			last = fmt.Sprintf("HTTP %d: %s", status, body)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before becoming ready: %v", p.Name, p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last answer: %s): %w", p.Name, last, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func plainGetter(url string) getter {
	return func(ctx context.Context) (int, string, error) {
		return get(ctx, http.DefaultClient, url)
	}
}

func get(ctx context.Context, client *http.Client, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body), err
}

// FreePorts reserves n distinct loopback ports by binding them all at
// once, then releases them for the processes to take. They are drawn
// below the kernel's ephemeral range (ip_local_port_range, 32768 and up
// by default): a port the kernel hands out as an outgoing connection's
// local port, as a ":0" listen would return, can be taken by any
// connection before the server binds it.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("find a free port in [%d, %d): none of 1000 tried was free", minPort, maxPort)
		}
		p := minPort + rand.IntN(maxPort-minPort)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		listeners = append(listeners, l)
		ports = append(ports, p)
	}
	return ports, nil
}

// The ports FreePorts draws from: below the default ephemeral range.
const minPort, maxPort = 20000, 32768

const logTailLines = 40

// AdminConfig returns a new cluster-admin client configuration: a client
// certificate in group system:masters.
func (e *Env) AdminConfig() *rest.Config {
	return &rest.Config{
		Host: e.host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   e.pki.caPEM,
			CertData: e.pki.adminCertPEM,
			KeyData:  e.pki.adminKeyPEM,
		},
		// Tests create objects in bursts; client-side throttling would only
		// slow them down.
		QPS:   200,
		Burst: 400,
	}
}
