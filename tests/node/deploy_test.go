package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// The image deploy/ references, which `make image` builds into
// bin/plexus-image.tar.
const (
	deployImage  = "ghcr.io/plexus-cni/plexus:v0.1.0"
	upgradeImage = "ghcr.io/plexus-cni/plexus:v0.1.1"
)

// waitingForDefault is what the installer (plexusctl install, or plexusd's
// own) logs when it finds no default network's config.
const waitingForDefault = "waiting for the cluster-wide default network's CNI config"

// deployNode is a node for the deploy/ tests: a control plane with the
// controllers a DaemonSet needs, a node whose CNI bin dir holds the
// reference plugins but not plexus (the DaemonSet installs it), and the
// plexus image imported. It returns the world whose bridges and leases the
// test's networks use, its leases and plexus's records in the relocated
// /var/lib/cni (see Deployment.HostPath).
func deployNode(t *testing.T, name, kustomization string) (*Node, *Deployment, *harness.World) {
	t.Helper()
	return deployNodeWith(t, name, func(n *Node) *Deployment { return n.RenderDeploy(t, kustomization) })
}

// deployNodeWith is deployNode with the deployment render renders.
func deployNodeWith(t *testing.T, name string, render func(*Node) *Deployment) (*Node, *Deployment, *harness.World) {
	t.Helper()
	binDir, err := kubeenv.DefaultBinDir()
	harness.Must(t, err)
	archive := filepath.Join(binDir, "plexus-image.tar")
	if _, err := os.Stat(archive); err != nil {
		skipOrFail(t, fmt.Sprintf("%s not found: run `make image`", archive))
	}
	cniBin := t.TempDir()
	copyReferencePlugins(t, cniBin)
	env := kubeenv.ForTest(t, kubeenv.Options{})
	n := Start(t, env, Options{Name: name, CNIBinDir: cniBin})
	n.StartControllers(t)
	n.ImportImage(t, archive)
	d := render(n)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("deploy/ on node %s:\n%s", name, d.Explain())
		}
	})
	w := harness.New(t)
	w.IPAMDir = d.HostPath("/var/lib/cni/networks")
	w.CacheDir = d.HostPath("/var/lib/cni/plexus")
	harness.Must(t, os.MkdirAll(w.IPAMDir, 0o755))
	// Before the world's cleanups and the uninstall: plexus is still
	// installed, so the pods' DELs run through it.
	t.Cleanup(n.Reset)
	// Before the reset (cleanups run last first): a DaemonSet left in
	// place would recreate its pod while the reset removes sandboxes.
	t.Cleanup(func() { d.removeDaemonSet(t) })
	return n, d, w
}

// copyReferencePlugins copies the reference plugins (not plexus) into dir:
// copies, not links, since thick mode runs them inside plexusd's
// container, which sees only the mounted directory.
func copyReferencePlugins(t *testing.T, dir string) {
	t.Helper()
	for _, p := range []string{"bridge", "host-local", "loopback", "bandwidth", "tuning", "static", "macvlan", "ptp", "vlan", "portmap"} {
		src, err := os.Open(filepath.Join(harness.BinDir, p))
		harness.Must(t, err)
		dst, err := os.OpenFile(filepath.Join(dir, p), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		harness.Must(t, err)
		_, err = io.Copy(dst, src)
		src.Close()
		harness.Must(t, err)
		harness.Must(t, dst.Close())
	}
}

// writeDefaultNetwork writes the cluster-wide default network's config
// into the node's conf dir, as the default network's own DaemonSet would,
// and returns its path and bytes.
func writeDefaultNetwork(t *testing.T, n *Node, w *harness.World) (string, []byte) {
	t.Helper()
	path := filepath.Join(n.ConfDir, "10-default.conflist")
	data := []byte(w.BridgeConf(DefaultNetwork, w.Bridge(), CNIVersion, true))
	tmp := filepath.Join(n.ConfDir, ".tmp-default")
	harness.Must(t, os.WriteFile(tmp, data, 0o644))
	harness.Must(t, os.Rename(tmp, path))
	return path, data
}

// waitLoaded waits until containerd uses the network named network.
func waitLoaded(t *testing.T, n *Node, d *Deployment, network string) {
	t.Helper()
	d.waitFor(t, "containerd uses network "+network, func(ctx context.Context) (bool, string) {
		got, _, err := n.loadedNetwork(ctx)
		return err == nil && got == network, fmt.Sprintf("it uses %q (%v)", got, err)
	})
	n.WaitReady()
}

// installAwaitingDefault applies deploy/ and waits for its pod and for bin,
// the binary it installs. Its container has then looked for the default
// network's config, found none, and so written none of its own, conf
// (s6.1). Then it writes the default network's config and waits until
// containerd uses plexus's; it returns the default network's config path
// and bytes.
func installAwaitingDefault(t *testing.T, n *Node, d *Deployment, w *harness.World, container, bin, conf string) (string, []byte) {
	t.Helper()
	d.Apply(t)
	pod := d.WaitPod(t, deployImage)
	d.WaitFile(t, bin, true)
	d.WaitLog(t, pod, container, waitingForDefault)
	if _, err := os.Stat(conf); err == nil {
		t.Fatalf("%s exists before the default network's config (s6.1)", conf)
	}
	defaultConf, defaultData := writeDefaultNetwork(t, n, w)
	d.WaitFile(t, conf, true)
	waitLoaded(t, n, d, PlexusNetwork)
	return defaultConf, defaultData
}

// uninstallDeploy is the README's uninstall: it sets PLEXUS_UNINSTALL=true
// on container, waits for the rollout (plexus's config conf still there),
// and deletes what deploy/ created.
func uninstallDeploy(t *testing.T, d *Deployment, container, conf string) {
	t.Helper()
	d.Patch(t, fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"env":[{"name":"PLEXUS_UNINSTALL","value":"true"}]}]}}}}`, container))
	d.WaitRollout(t, "")
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("after the rollout with PLEXUS_UNINSTALL=true, before the delete: %v", err)
	}
	d.Delete(t)
}

// assertDefaultAlone checks, after an uninstall, that the default
// network's config is the one written at install, that containerd uses it
// again, and that a new pod in the fresh namespace ns runs on it alone.
func assertDefaultAlone(t *testing.T, n *Node, d *Deployment, defaultConf string, defaultData []byte, ns string) {
	t.Helper()
	got, err := os.ReadFile(defaultConf)
	harness.Must(t, err)
	if !bytes.Equal(got, defaultData) {
		t.Errorf("the default network's config changed:\n%s\nwant\n%s", got, defaultData)
	}
	waitLoaded(t, n, d, DefaultNetwork)
	harness.Must(t, n.Env.CreateNamespace(t.Context(), ns, nil))
	pod := n.RunPod(ns, "pod-plain", "")
	c := n.PodNetns(pod)
	if ifs := harness.IfNames(c.Links(t)); !reflect.DeepEqual(ifs, []string{"eth0"}) {
		t.Errorf("pod on the default network alone has interfaces %v, want [eth0]", ifs)
	}
	n.DeletePod(ns, "pod-plain")
}

// TestDeploy is deploy/thin (thin mode) applied as `kubectl apply -k
// deploy/thin/` to a node run by kubelet and containerd, with the image
// `make image` builds: install, upgrade, uninstall as the README documents
// them.
func TestDeploy(t *testing.T) {
	node, d, world := deployNode(t, "node-deploy", "deploy/thin")
	conf := filepath.Join(node.ConfDir, "00-plexus.conflist")
	plugin := filepath.Join(node.cniBinDir, "plexus")
	kubeconfig := d.HostPath("/etc/cni/net.d/plexus.d/plexus.kubeconfig")
	policyDir := d.HostPath(thinPolicyDir)
	var defaultConf string
	var defaultData []byte

	// The DaemonSet's pod runs under kubelet before the node has any
	// network (it is in the host's); it installs the plugin, but its
	// config only once the default network's exists (s6.1). Then a pod
	// with selections gets every network and its network-status.
	t.Run("Install", func(t *testing.T) {
		n := node.With(t)
		defaultConf, defaultData = installAwaitingDefault(t, n, d, world, "install", plugin, conf)
		assertThinPolicy(t, policyDir)
		podWithSelections(t, n, world, "deploy-install")
	})
	if t.Failed() {
		return
	}
	// The installer reports the node's side in its PlexusNode.
	t.Run("NodeReported", func(t *testing.T) {
		assertNodeReported(node.With(t), d, "thin")
	})

	// The baseline policy the installer copied is on (docs/security.md).
	t.Run("BaselinePolicy", func(t *testing.T) {
		assertBaselineDenies(t, node.With(t), world, "deploy-baseline")
	})
	// The runtime runs the plugin on the host: portmap finds the host's
	// iptables, a shell delegate the host's ip, as in thick mode.
	t.Run("HostToolsAndHostPort", func(t *testing.T) {
		assertHostToolsAndHostPort(t, node.With(t), d, world, conf)
	})

	// A new image rolls out: the old pod goes, the new one runs, and
	// plexus's config is there at every moment in between.
	t.Run("Upgrade", func(t *testing.T) {
		n := node.With(t)
		binDir, err := kubeenv.DefaultBinDir()
		harness.Must(t, err)
		archive := filepath.Join(t.TempDir(), "plexus-v0.1.1.tar")
		policies, err := filepath.Abs(filepath.Join("..", "..", "policies"))
		harness.Must(t, err)
		out, err := exec.Command(filepath.Join(binDir, "ocibuild"), "-preset", "plexus", "-bin", binDir, "-policies", policies,
			"-version", "v0.1.1", "-name", upgradeImage, "-out", archive).CombinedOutput()
		if err != nil {
			t.Fatalf("ocibuild %s: %v: %s", upgradeImage, err, out)
		}
		n.ImportImage(t, archive)
		old := d.WaitPod(t, deployImage)
		// The token the old installer wrote, which the plugin uses until
		// the new one writes its own.
		oldToken, err := kubeconfigToken(kubeconfig)
		harness.Must(t, err)
		stop := watchFiles(conf, plugin, kubeconfig)
		stopToken := watchToken(t, n.Client, kubeconfig)
		d.Patch(t, fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"install","image":%q}]}}}}`, upgradeImage))
		pod := d.WaitRollout(t, upgradeImage)
		// The new installer has written its own node-bound token into the
		// plugin's kubeconfig and checked the config: from here on a gap
		// could no longer be blamed on the rollout.
		d.WaitLog(t, pod, "install", "wrote kubeconfig")
		if missing := stop(); len(missing) > 0 {
			t.Errorf("during the rollout these went missing: %v", missing)
		}
		// The token the plugin reads was valid the whole time: bound to
		// the Node, not to the deleted pod, so thin ADDs never got a 401.
		reviews, invalid := stopToken()
		if reviews == 0 {
			t.Error("the kubeconfig's token was never reviewed during the rollout")
		}
		for _, msg := range invalid {
			t.Errorf("during the rollout the plugin's kubeconfig token was rejected: %s", msg)
		}
		// However fast the new pod starts: the old installer's token
		// outlives the old pod, so no ADD in between gets a 401.
		d.WaitPodGone(t, old)
		// kube-apiserver caches a successful token authentication for 10s
		// (its token success cache TTL): only after that does a review
		// revalidate the token's bound object, as the plugin's next call
		// after a quiet spell would.
		time.Sleep(apiserverTokenCacheTTL + 2*time.Second)
		if _, err := reviewToken(t.Context(), n.Client, oldToken); err != nil {
			t.Errorf("the token the old installer wrote, after its pod was deleted: %v", err)
		}
		if user, err := reviewKubeconfig(t.Context(), n.Client, kubeconfig); err != nil {
			t.Error(err)
		} else if node, pod := user.Extra["authentication.kubernetes.io/node-name"], user.Extra["authentication.kubernetes.io/pod-name"]; len(node) != 1 || node[0] != n.Name || len(pod) != 0 {
			t.Errorf("the kubeconfig's token is %s with node-name %v and pod-name %v, want bound to node %s and no pod", user.Username, node, pod, n.Name)
		}
		if pod.UID == old.UID {
			t.Fatalf("the DaemonSet's pod %s was not replaced", pod.Name)
		}
		waitLoaded(t, n, d, PlexusNetwork)
		podWithSelections(t, n, world, "deploy-upgrade")
	})
	if t.Failed() {
		return
	}

	// The README's uninstall: set PLEXUS_UNINSTALL=true, wait for the
	// rollout, delete what deploy/ created. plexus's files are gone, the
	// default network's config is as it was, and a new pod runs on the
	// default network alone.
	t.Run("Uninstall", func(t *testing.T) {
		n := node.With(t)
		uninstallDeploy(t, d, "install", conf)
		for _, p := range []string{conf, plugin, kubeconfig, policyDir, filepath.Dir(kubeconfig)} {
			d.WaitFile(t, p, false)
		}
		assertDefaultAlone(t, n, d, defaultConf, defaultData, "deploy-uninstalled")
	})
}

// TestDeployThick is deploy/, the default install (thick mode), applied to
// a node: plexusd's pod runs under kubelet, installs its config only once
// the default network's exists (s6.1), and a pod with selections is
// attached through plexusd, which publishes its network-status; the
// baseline policy is on. The documented uninstall then removes plexus's
// config and leaves the default network's.
func TestDeployThick(t *testing.T) {
	node, d, world := deployNode(t, "node-deploy-thick", "deploy")
	d.ShareRuntimeSocket(t)
	conf := filepath.Join(node.ConfDir, "00-plexus.conflist")
	var defaultConf string
	var defaultData []byte

	t.Run("Install", func(t *testing.T) {
		n := node.With(t)
		defaultConf, defaultData = installAwaitingDefault(t, n, d, world, "plexusd", filepath.Join(n.cniBinDir, "plexus-shim"), conf)
		data, err := os.ReadFile(conf)
		harness.Must(t, err)
		if !bytes.Contains(data, []byte(`"plexus-shim"`)) {
			t.Fatalf("plexusd's config does not run the shim:\n%s", data)
		}
		podWithSelections(t, n, world, "deploy-thick")
	})
	if t.Failed() {
		return
	}
	// docs/kubernetes.md: plexusd reports the node's side in its
	// PlexusNode, which explain --node reads.
	t.Run("NodeReported", func(t *testing.T) {
		assertNodeReported(node.With(t), d, "thick")
	})
	// plexusd loads the image's rule library and baseline (deploy/'s
	// ConfigMap) and denies as the baseline says.
	t.Run("BaselinePolicy", func(t *testing.T) {
		assertBaselineDenies(t, node.With(t), world, "deploy-thick-baseline")
		body := getBody(t.Context(), thickMetrics)
		if v := harness.SumMetric(body, "plexus_policy_denials_total", `code="namespace-isolation"`); v == 0 {
			t.Errorf("plexusd counted no namespace-isolation denial: %s", linesWith(body, "plexus_policy"))
		}
	})
	// plexusd runs delegates chrooted to the host's / (--delegate-root):
	// portmap finds the host's iptables, a shell delegate the host's ip.
	t.Run("HostToolsAndHostPort", func(t *testing.T) {
		assertHostToolsAndHostPort(t, node.With(t), d, world, conf)
	})
	// plexusd in its pod changes the pod's default route inside the
	// network namespace the runtime mounted after plexusd started,
	// reached through the host's root: no mount propagation, the host's
	// / private.
	t.Run("MultusPodsThroughTheHostRoot", func(t *testing.T) {
		multusPods(t, node.With(t), world, "deploy-thick-multus")
	})
	// plexusd asked the runtime (--cri-socket) where it reads CNI configs
	// and plugins, and found the node's directories: the ones it
	// installed into.
	t.Run("RuntimeDirsChecked", func(t *testing.T) {
		pod := d.WaitPod(t, deployImage)
		d.WaitLog(t, pod, "plexusd", `msg="the runtime's CNI directories"`)
		d.WaitLog(t, pod, "plexusd", "confDir="+node.ConfDir+" ")
	})
	// deploy/ sets --cri-socket: plexusd asks the runtime for its
	// sandboxes (the stale record collection) and gets an answer.
	t.Run("StaleRecordCollectionRuns", func(t *testing.T) {
		var body string
		d.waitFor(t, "a stale record pass that listed the runtime's sandboxes", func(ctx context.Context) (bool, string) {
			body = getBody(ctx, thickMetrics)
			return harness.SumMetric(body, "plexus_gc_passes_total", `result="ok"`) > 0, linesWith(body, "plexus_gc_passes_total")
		})
		if v := harness.SumMetric(body, "plexus_gc_passes_total", `result="cri_failed"`); v > 0 {
			t.Errorf("%v passes could not list the runtime's sandboxes", v)
		}
	})
	if t.Failed() {
		return
	}

	// docs/install.md: with PLEXUS_UNINSTALL=true plexusd removes
	// plexus's CNI config when it stops, and the binaries it installed.
	t.Run("Uninstall", func(t *testing.T) {
		n := node.With(t)
		uninstallDeploy(t, d, "plexusd", conf)
		d.WaitFile(t, conf, false)
		for _, b := range []string{"plexus", "plexus-shim"} {
			d.WaitFile(t, filepath.Join(n.cniBinDir, b), false)
		}
		for _, b := range []string{"bridge", "host-local"} {
			if _, err := os.Stat(filepath.Join(n.cniBinDir, b)); err != nil {
				t.Errorf("the thick uninstall took the default network's plugin: %v", err)
			}
		}
		assertDefaultAlone(t, n, d, defaultConf, defaultData, "deploy-thick-uninstalled")
	})
}

// thickMetrics is plexusd's /metrics as deploy/ serves it (host
// network, loopback).
const thickMetrics = "http://127.0.0.1:9191/metrics"

// getBody is the body of a GET of url, or the error as text.
func getBody(ctx context.Context, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// linesWith is the lines of text holding substr, or the start of text if
// none does (an error, say).
func linesWith(text, substr string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return text[:min(len(text), 300)]
	}
	return strings.Join(out, "; ")
}

// watchFiles polls the paths until the returned stop is called, which
// returns every path that was missing at some poll.
func watchFiles(paths ...string) (stop func() []string) {
	var done atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	missing := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			for _, p := range paths {
				if _, err := os.Stat(p); err != nil {
					mu.Lock()
					missing[p] = true
					mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() []string {
		done.Store(true)
		wg.Wait()
		var out []string
		for p := range missing {
			out = append(out, p)
		}
		return out
	}
}

// apiserverTokenCacheTTL is how long kube-apiserver keeps a successful
// token authentication before validating the token again (not a flag:
// its built-in authentication options' TokenSuccessCacheTTL, 10s).
const apiserverTokenCacheTTL = 10 * time.Second

// watchToken reviews the token in the plugin's kubeconfig (TokenReview,
// as the API server authenticates the plugin) until stop, which returns
// how many reviews ran and every rejection, each reported once.
func watchToken(t *testing.T, c kubernetes.Interface, kubeconfig string) (stop func() (int, []string)) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var reviews int
	var invalid []string
	seen := map[string]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, err := reviewKubeconfig(ctx, c, kubeconfig)
			if ctx.Err() != nil {
				return
			}
			reviews++
			if err != nil && !seen[err.Error()] {
				seen[err.Error()] = true
				invalid = append(invalid, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() (int, []string) {
		cancel()
		wg.Wait()
		return reviews, invalid
	}
}

// reviewKubeconfig is the TokenReview of the kubeconfig's token: its user,
// or why the API server would refuse it.
func reviewKubeconfig(ctx context.Context, c kubernetes.Interface, kubeconfig string) (authnv1.UserInfo, error) {
	token, err := kubeconfigToken(kubeconfig)
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	return reviewToken(ctx, c, token)
}

// kubeconfigToken is the token the plugin reads from kubeconfig.
func kubeconfigToken(kubeconfig string) (string, error) {
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kc.AuthInfos[ctx.AuthInfo] == nil {
		return "", fmt.Errorf("%s: no credentials for context %q", kubeconfig, kc.CurrentContext)
	}
	return kc.AuthInfos[ctx.AuthInfo].Token, nil
}

// reviewToken is the TokenReview of token: its user, or why the API
// server refuses it.
func reviewToken(ctx context.Context, c kubernetes.Interface, token string) (authnv1.UserInfo, error) {
	r, err := c.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, fmt.Errorf("TokenReview: %w", err)
	}
	if !r.Status.Authenticated {
		return authnv1.UserInfo{}, fmt.Errorf("token not authenticated: %s", r.Status.Error)
	}
	return r.Status.User, nil
}

// thinPolicyDir is where deploy/thin's installer copies the image's rule
// library and baseline on the host, and where its config loads them from.
const thinPolicyDir = "/etc/cni/net.d/plexus.d/policy"

// assertThinPolicy checks the policy files the thin installer copied to
// dir: the baseline and the library, without the library's tests.
func assertThinPolicy(t *testing.T, dir string) {
	t.Helper()
	for _, f := range []string{"baseline.yaml", "library/authz.rego", "library/namespace_isolation.rego"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the installer did not copy %s: %v", f, err)
		}
	}
	if tests, _ := filepath.Glob(filepath.Join(dir, "library", "*_test.rego")); len(tests) > 0 {
		t.Errorf("the installer copied the library's tests: %v", tests)
	}
}

// assertBaselineDenies checks that the baseline policy is on: a pod in the
// fresh namespace ns selecting a NAD of another namespace is refused
// before any delegate runs (namespace-isolation), and leaves nothing
// behind. (podWithSelections shows the pod's own namespace's NADs are
// allowed.)
func assertBaselineDenies(t *testing.T, n *Node, w *harness.World, ns string) {
	t.Helper()
	other := ns + "-nads"
	bridgeNADs(t, n, w, other, "blue")
	harness.Must(t, n.Env.CreateNamespace(t.Context(), ns, nil))
	before := harness.HostVeths(t)
	n.CreatePod(n.PodSpec(ns, "pod-denied", other+"/blue"))
	_, err := n.waitRunning(ns, "pod-denied")
	var se *SandboxError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "[namespace-isolation]") {
		t.Errorf("a pod selecting %s/blue from %s: %v, want its sandbox refused by the baseline's namespace-isolation", other, ns, err)
	}
	n.DeletePod(ns, "pod-denied")
	w.AssertNoLeaks(before)
}

// TestDeployUpgradeThinToThick is docs/kubernetes.md's move from thin mode
// (deploy/thin) to the default install (deploy/): delete the thin
// DaemonSet without PLEXUS_UNINSTALL, so plexus's config, plugin and
// records stay and pods keep being served, then apply deploy/. plexusd
// takes plexus's config over, a pod the thin plugin attached is detached
// through plexusd from the thin plugin's records (same cacheDir) with
// nothing left, and a new pod attaches through plexusd.
func TestDeployUpgradeThinToThick(t *testing.T) {
	node, thin, world := deployNode(t, "node-deploy-upgrade", "deploy/thin")
	conf := filepath.Join(node.ConfDir, "00-plexus.conflist")
	plugin := filepath.Join(node.cniBinDir, "plexus")
	installAwaitingDefault(t, node, thin, world, "install", plugin, conf)
	old := runSelectingPod(t, node, world, "upgrade-thin")

	// 1. kubectl -n kube-system delete daemonset plexus: the installer
	// leaves everything in place.
	thin.DeleteDaemonSet(t)
	for _, p := range []string{conf, plugin} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("deleting the thin DaemonSet removed %s: %v", p, err)
		}
	}

	// 2. kubectl apply -k deploy/: plexusd replaces plexus's config with
	// the shim's, and containerd loads it.
	thick := node.RenderDeploy(t, "deploy")
	thick.ShareRuntimeSocket(t)
	thick.Apply(t)
	thick.WaitPod(t, deployImage)
	thick.waitFor(t, "containerd uses plexusd's config", func(ctx context.Context) (bool, string) {
		name, src, err := node.loadedNetwork(ctx)
		return err == nil && name == PlexusNetwork && bytes.Contains(src, []byte(`"plexus-shim"`)),
			fmt.Sprintf("network %q (%v): %s", name, err, src)
	})
	node.WaitReady()

	// The thin plugin's pod: its DEL goes to plexusd, which finds what
	// to detach in the thin plugin's records.
	metric := func(command string) float64 {
		return harness.SumMetric(getBody(t.Context(), thickMetrics), "plexus_requests_total", `command="`+command+`"`, `result="ok"`)
	}
	dels := metric("DEL")
	old.deleteAndCheck(t)
	if got := metric("DEL"); got <= dels {
		t.Errorf("plexusd served no DEL for the thin plugin's pod (%v before, %v after): the shim's fallback did it", dels, got)
	}

	// What thin mode alone used on the node (its kubeconfig and policy
	// copies) can go: docs/kubernetes.md removes it. A new pod attaches
	// through plexusd, the baseline policy included.
	harness.Must(t, os.RemoveAll(thin.HostPath("/etc/cni/net.d/plexus.d")))
	adds := metric("ADD")
	podWithSelections(t, node, world, "upgrade-thick")
	if got := metric("ADD"); got <= adds {
		t.Errorf("plexusd served no ADD for the new pod (%v before, %v after)", adds, got)
	}
	assertBaselineDenies(t, node, world, "upgrade-baseline")
	if t.Failed() {
		return
	}
	uninstallDeploy(t, thick, "plexusd", conf)
	thick.WaitFile(t, conf, false)
}
