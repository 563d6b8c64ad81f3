package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// thickMemoryLimit is deploy/'s resources.limits.memory for plexusd;
// the density tests run plexusd under it, so a burst that would be
// OOM-killed in the DaemonSet is OOM-killed here too.
func thickMemoryLimit(t testing.TB) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "daemonset.yaml"))
	harness.Must(t, err)
	var ds appsv1.DaemonSet
	harness.Must(t, yaml.Unmarshal(data, &ds))
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "plexusd" {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	t.Fatal("deploy/daemonset.yaml: container plexusd has no memory limit")
	return 0
}

// densityPods is kubelet's default maxPods; PLEXUS_DENSITY_PODS overrides
// it for a quicker look.
func densityPods(t testing.TB) int {
	if s := os.Getenv("PLEXUS_DENSITY_PODS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 110 {
			t.Fatalf("PLEXUS_DENSITY_PODS=%q: want 1 to 110", s)
		}
		return n
	}
	return 110
}

// burst is what one burst of pods cost.
type burst struct {
	running, gone time.Duration
	adds          []time.Duration // plexus's own ADD times, from its log
}

// BenchmarkDensity fills the node: 110 pods (kubelet's default maxPods)
// with 2 bridge selections each are created through the API at once, then
// deleted at once, with the default network alone, plexus thin, plexus
// thick, plexus thick with the example extension's key on one selection,
// and Multus thick (multus.go) with the same selections. It reports the
// time until every pod is Running and until every pod is gone, plexus's
// per-pod ADD time (p50, p99, from its log lines' elapsed), the CPU of
// containerd's group (containerd, its shims and every CNI plugin it runs:
// thin plexus and its delegates) and of the daemon's group (plexusd or
// multus-daemon, and its delegates), and the daemon's memory: resident at
// rest before the first burst, and the group's peak, plexusd under
// deploy/'s limit, multus-daemon under none (its manifest's 50 MiB would
// be a failure to report, not a peak): medians of the iterations, which
// run the setups in turn. Nothing of plexus's may leak: no host veth,
// IPAM lease, record or lock is left once the pods are gone; the leases
// Multus leaves of its default network are reported (leases-left-*), with
// multus-daemon's first errors.
//
//	PLEXUS_E2E=1 go test -run '^$' -bench Density -benchtime 3x -timeout 40m ./tests/node/
func BenchmarkDensity(b *testing.B) {
	pods := densityPods(b)
	if why := MultusBuilt(); why != "" {
		skipOrFail(b, why)
	}
	env := kubeenv.ForTest(b, kubeenv.Options{})
	n := Start(b, env, Options{Name: "node-density", CNIBinDir: binDirWith(b, nil, multusPlugins())})
	runtime := NewCgroup(b, "plexus-containerd")
	runtime.Add(n.containerd.Pid())
	limit := thickMemoryLimit(b)
	thin := n.PlexusWorld()
	thick, d, daemon := startLimitedDaemon(b, n, "plexusd", limit, nil)
	// make build puts the example extensions beside the binaries.
	mod := filepath.Join(os.Getenv("PLEXUS_BIN"), "extensions", "overrides.wasm")
	if _, err := os.Stat(mod); err != nil {
		b.Skipf("extension modules not built (make build): %v", err)
	}
	ext, dExt, daemonExt := startLimitedDaemon(b, n, "plexusd-ext", limit, func(w *harness.World) {
		w.Set("extensions", map[string]any{"modules": []any{map[string]any{
			"path": mod, "config": map[string]any{"allow": []string{"mtu"}}}}})
	})
	multus := n.PlexusWorld()
	md := n.StartMultusDaemon(b, multus, filepath.Join(b.TempDir(), "multus"))
	multusCG := NewCgroup(b, "multus-daemon")
	multusCG.Add(md.Pid())
	harness.Must(b, env.CreateNamespace(b.Context(), densityNS, nil))
	for _, nad := range []string{"blue", "red"} {
		harness.Must(b, kubeenv.CreateNAD(b.Context(), n.Dyn, densityNS, nad, thin.BridgeNADConfig(nad)))
	}
	time.Sleep(2 * time.Second) // the daemons' caches synced, at rest
	b.ReportMetric(RSSMiB(d.Pid()), "MiB-rest-plexusd")
	b.ReportMetric(RSSMiB(md.Pid()), "MiB-rest-multus-daemon")
	type daemonOf struct {
		running func() bool
		cg      *Cgroup
	}
	plexusd := daemonOf{d.Running, daemon}
	configs := []struct {
		name     string
		install  func()
		networks string
		log      string
		daemon   daemonOf
	}{
		{"default", func() { n.InstallDefault(thin) }, "", "", plexusd},
		{"thin", func() { n.InstallPlexus(thin) }, "blue,red", filepath.Join(thin.Dir, "plexus.log"), plexusd},
		{"thick", func() { n.InstallPlexus(thick) }, "blue,red", d.LogPath, plexusd},
		// The example extension's key on one selection: plexusd then holds
		// the extension's compiled module and instances too.
		{"thick-extension", func() { n.InstallPlexus(ext) }, `[{"name":"blue","io.plexus.overrides":{"mtu":1400}},{"name":"red"}]`, dExt.LogPath, daemonOf{dExt.Running, daemonExt}},
		{"multus-thick", func() { n.InstallMultusThick(md) }, "blue,red", "", daemonOf{md.Running, multusCG}},
	}
	// Per setup: every iteration's times and CPU, every ADD; reported as
	// medians (ADDs: percentiles of all), memory as the highest peak.
	running, gone, cpus, adds := map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}, map[string][]time.Duration{}
	peaks := map[string]CgroupUsage{}
	leftover := map[string]int{}
	for i := range b.N {
		for _, c := range configs {
			c.install()
			before := harness.HostVeths(b)
			logStart := fileSize(c.log)
			cpu0, dcpu0 := runtime.CPUSeconds(), c.daemon.cg.CPUSeconds()
			c.daemon.cg.Start()
			r := n.runBurst(fmt.Sprintf("%s-%d", c.name, i), pods, c.networks)
			use := c.daemon.cg.Stop()
			cpu, dcpu := runtime.CPUSeconds()-cpu0, c.daemon.cg.CPUSeconds()-dcpu0
			r.adds = addTimes(b, c.log, logStart)
			b.Logf("%s: %d pods Running in %v, gone in %v; containerd's group %.1f s CPU, the daemon's %.1f s; daemon peak anon %.1f MiB, total %.1f MiB, failcnt %d, OOM kills %d; %d ADDs p50 %v p99 %v",
				c.name, pods, r.running, r.gone, cpu, dcpu, use.PeakAnonMiB, use.PeakTotalMiB, use.Failcnt, use.OOMKills, len(r.adds), percentile(r.adds, 50), percentile(r.adds, 99))
			running[c.name] = append(running[c.name], r.running)
			gone[c.name] = append(gone[c.name], r.gone)
			cpus[c.name] = append(cpus[c.name], time.Duration((cpu+dcpu)*float64(time.Second)))
			adds[c.name] = append(adds[c.name], r.adds...)
			p := peaks[c.name]
			p.PeakAnonMiB, p.PeakTotalMiB = max(p.PeakAnonMiB, use.PeakAnonMiB), max(p.PeakTotalMiB, use.PeakTotalMiB)
			peaks[c.name] = p
			if use.OOMKills > 0 || !c.daemon.running() {
				b.Errorf("%s: the daemon exited or was OOM-killed (%d OOM kills)", c.name, use.OOMKills)
			}
			for _, w := range []*harness.World{thin, thick, ext} {
				w.AssertNoLeaks(before)
			}
			// What Multus leaves is reported, not failed: it is not
			// plexus's to fix.
			if left := leases(b, multus.IPAMDir); left > 0 {
				b.Logf("%s: %d IPAM leases of Multus's default network left once the pods are gone; multus-daemon's first errors:\n%s", c.name, left, firstErrors(b, md.LogPath, 6))
				leftover[c.name] = max(leftover[c.name], left)
			}
		}
	}
	for _, c := range configs {
		b.ReportMetric(median(running[c.name]).Seconds(), "s-running-"+c.name)
		b.ReportMetric(median(gone[c.name]).Seconds(), "s-gone-"+c.name)
		b.ReportMetric(median(cpus[c.name]).Seconds(), "cpu-s-"+c.name)
		if c.log != "" {
			b.ReportMetric(float64(percentile(adds[c.name], 50).Microseconds())/1000, "ms-add-p50-"+c.name)
			b.ReportMetric(float64(percentile(adds[c.name], 99).Microseconds())/1000, "ms-add-p99-"+c.name)
		}
		if strings.HasPrefix(c.name, "multus") {
			b.ReportMetric(float64(leftover[c.name]), "leases-left-"+c.name)
		}
		if strings.HasPrefix(c.name, "thick") || strings.HasPrefix(c.name, "multus") {
			b.ReportMetric(peaks[c.name].PeakAnonMiB, "MiB-peak-anon-"+c.name)
			b.ReportMetric(peaks[c.name].PeakTotalMiB, "MiB-peak-total-"+c.name)
		}
	}
}

// firstErrors is the first count lines of Multus's log at level error.
func firstErrors(t testing.TB, path string, count int) string {
	data, err := os.ReadFile(path)
	harness.Must(t, err)
	var out []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, "[error]") && len(out) < count {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// leases counts host-local's lease files (named for the address) under
// dir, in every network's directory.
func leases(t testing.TB, dir string) int {
	nets, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	harness.Must(t, err)
	count := 0
	for _, nw := range nets {
		if !nw.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, nw.Name()))
		harness.Must(t, err)
		for _, f := range files {
			if net.ParseIP(f.Name()) != nil {
				count++
			}
		}
	}
	return count
}

// startLimitedDaemon starts plexusd for a new World (set up by prepare
// first, if given) in its own cgroup under limit.
func startLimitedDaemon(b *testing.B, n *Node, name string, limit int64, prepare func(*harness.World)) (*harness.World, *harness.Daemon, *Cgroup) {
	w := n.PlexusWorld()
	if prepare != nil {
		prepare(w)
	}
	d := w.StartDaemon("--node-name", n.Name, "--log-level", "info")
	cg := NewCgroup(b, name)
	cg.Add(d.Pid())
	cg.LimitMemory(limit)
	return w, d, cg
}

const densityNS = "density"

// runBurst creates count pods named prefix-N with the selection at once,
// waits until all are Running, deletes them at once and waits until all are
// gone from the API; then removes their sandboxes, as kubelet's garbage
// collection would.
func (n *Node) runBurst(prefix string, count int, networks string) burst {
	n.t.Helper()
	var r burst
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	start := time.Now()
	n.parallel(names, func(ctx context.Context, name string) error {
		_, err := n.Client.CoreV1().Pods(densityNS).Create(ctx, n.PodSpec(densityNS, name, networks), metav1.CreateOptions{})
		return err
	})
	n.waitPhases(prefix, count, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	r.running = time.Since(start)
	start = time.Now()
	n.parallel(names, func(ctx context.Context, name string) error {
		return n.Client.CoreV1().Pods(densityNS).Delete(ctx, name, metav1.DeleteOptions{})
	})
	n.waitPhases(prefix, 0, nil)
	r.gone = time.Since(start)
	harness.Must(n.t, n.removeAllSandboxes())
	return r
}

// parallel runs call for every name, 16 at a time (a controller's burst).
func (n *Node) parallel(names []string, call func(context.Context, string) error) {
	n.t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = call(n.t.Context(), name)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		harness.Must(n.t, err)
	}
}

// waitPhases polls until exactly want pods named prefix-* exist and match
// (nil: any), failing on a failed sandbox.
func (n *Node) waitPhases(prefix string, want int, match func(*corev1.Pod) bool) {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		list, err := n.Client.CoreV1().Pods(densityNS).List(n.t.Context(), metav1.ListOptions{})
		harness.Must(n.t, err)
		got, matched := 0, 0
		for i := range list.Items {
			p := &list.Items[i]
			if !strings.HasPrefix(p.Name, prefix+"-") {
				continue
			}
			got++
			if match == nil || match(p) {
				matched++
			}
		}
		if got == want && matched == want {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: %d pods, %d ready, want %d; sandbox failures:\n%s", prefix, got, matched, want, n.sandboxFailures())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sandboxFailures lists FailedCreatePodSandBox events of the namespace.
func (n *Node) sandboxFailures() string {
	list, err := n.Client.CoreV1().Events(densityNS).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "FailedCreatePodSandBox").String(),
	})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "%s: %s\n", e.InvolvedObject.Name, e.Message)
	}
	return b.String()
}

func fileSize(path string) int64 {
	if path == "" {
		return 0
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// addTimes reads the elapsed time of every "ADD done" line plexus logged
// after offset.
func addTimes(t testing.TB, path string, offset int64) []time.Duration {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	harness.Must(t, err)
	defer f.Close()
	_, err = f.Seek(offset, 0)
	harness.Must(t, err)
	var out []time.Duration
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.Contains(line, `msg="ADD done"`) {
			continue
		}
		_, rest, ok := strings.Cut(line, " elapsed=")
		if !ok {
			continue
		}
		d, err := time.ParseDuration(strings.Fields(rest)[0])
		harness.Must(t, err)
		out = append(out, d)
	}
	return out
}

// percentile is the p-th percentile (nearest rank); 0 for no samples.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// TestBurstLeavesNothing: 20 pods with 2 selections created at once and
// deleted at once, in thin and in thick mode, leave no host veth, IPAM
// lease, record, lock or libcni result behind, and plexusd survives the
// burst under deploy/'s memory limit.
func TestBurstLeavesNothing(t *testing.T) {
	env := kubeenv.ForTest(t, kubeenv.Options{})
	n := Start(t, env, Options{Name: "node-burst"})
	thin := n.PlexusWorld()
	thick := n.PlexusWorld()
	d := thick.StartDaemon("--node-name", n.Name, "--log-level", "info")
	limit := NewCgroup(t, "plexusd-burst")
	limit.Add(d.Pid())
	limit.LimitMemory(thickMemoryLimit(t))
	harness.Must(t, env.CreateNamespace(t.Context(), densityNS, nil))
	for _, nad := range []string{"blue", "red"} {
		harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, densityNS, nad, thin.BridgeNADConfig(nad)))
	}
	for _, tt := range []struct {
		name string
		w    *harness.World
	}{{"thin", thin}, {"thick", thick}} {
		t.Run(tt.name, func(t *testing.T) {
			n := n.With(t)
			n.InstallPlexus(tt.w)
			before := harness.HostVeths(t)
			n.runBurst(tt.name, 20, "blue,red")
			thin.AssertNoLeaks(before)
			thick.AssertNoLeaks(before)
			if !d.Running() {
				t.Fatalf("plexusd exited during the burst:\n%s", d.Log())
			}
		})
	}
}
