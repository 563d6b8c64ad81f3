package node

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// benchConfig is one CNI setup the benchmarks compare.
type benchConfig struct {
	name     string
	install  func()
	networks string
	// optIn setups run only when PLEXUS_BENCH_SETUPS names them.
	optIn bool
	// daemon is the plexusd serving the setup (thick), whose own time per
	// call BenchmarkSandboxStart reports beside the runtime's.
	daemon *harness.Daemon
}

// benchSetup is a node with a thin and a thick plexus World, Multus thin
// and thick (multus.go), each in front of a default network of its own, and
// three bridge NADs in namespace "bench", and the setups to compare: the
// default network installed alone, plexus thin and thick and Multus thin
// and thick with 0 and 3 selections (8 when named, opt-in: thin-8,
// thick-8, multus-thin-8, multus-thick-8). The daemons' resident memory after
// their start is reported (MiB-rest-plexusd, MiB-rest-multus-daemon).
//
// PLEXUS_BENCH_BASELINES names other plexus binaries (earlier builds),
// comma-separated, to compare in the same run, which drifts less than two
// runs do: setup thin-0-bN is thin-0 through the Nth (from 1).
func benchSetup(b *testing.B, name string) (*Node, []benchConfig) {
	env := kubeenv.ForTest(b, kubeenv.Options{})
	opts := Options{Name: name, ContainerdDebug: true}
	var baselines []string
	if v := os.Getenv("PLEXUS_BENCH_BASELINES"); v != "" {
		baselines = strings.Split(v, ",")
	}
	if why := MultusBuilt(); why != "" {
		skipOrFail(b, why)
	}
	opts.CNIBinDir = binDirWith(b, baselines, multusPlugins())
	n := Start(b, env, opts)
	// The default network alone has a World (bridge, leases) of its own,
	// as every setup does: sharing thin's moved thin-0's time in an A/A
	// run (docs/performance.md, "Setup").
	alone := n.PlexusWorld()
	thin := n.PlexusWorld()
	thick := n.PlexusWorld()
	// Thin and thick with no source: no API request, no status. What
	// each mode costs before it publishes anything (the floor an
	// asynchronous publish could reach).
	noAPI, noAPIThick := n.PlexusWorld(), n.PlexusWorld()
	noAPI.Set("kubeconfig", nil)
	noAPIThick.Set("kubeconfig", nil)
	// Log as deployed (info): the harness's debug level is for tests.
	for _, w := range []*harness.World{thin, thick, noAPI, noAPIThick} {
		w.Set("logLevel", "info")
	}
	d := thick.StartDaemon("--node-name", n.Name, "--log-level", "info")
	// A second plexusd, only when its opt-in setup runs.
	var dNoAPI *harness.Daemon
	if slices.Contains(strings.Split(os.Getenv("PLEXUS_BENCH_SETUPS"), ","), "thick-0-noapi") {
		dNoAPI = noAPIThick.StartDaemon("--node-name", n.Name, "--log-level", "info")
	}
	// Multus's worlds only give it a default network of its own.
	multusThin, multusThick := n.PlexusWorld(), n.PlexusWorld()
	mdir := b.TempDir()
	kubeconfig := n.MultusKubeconfig(b, mdir)
	mcache := filepath.Join(mdir, "cache")
	md := n.StartMultusDaemon(b, multusThick, filepath.Join(mdir, "daemon"))
	harness.Must(b, env.CreateNamespace(b.Context(), benchNS, nil))
	for _, nad := range []string{"blue", "red", "green"} {
		// On thin's bridges and leases; thick's pods use them too (the
		// leak checks are not run here).
		harness.Must(b, kubeenv.CreateNAD(b.Context(), n.Dyn, benchNS, nad, thin.BridgeNADConfig(nad)))
	}
	// Both daemons have synced their caches and idle.
	time.Sleep(2 * time.Second)
	b.ReportMetric(RSSMiB(d.Pid()), "MiB-rest-plexusd")
	b.ReportMetric(RSSMiB(md.Pid()), "MiB-rest-multus-daemon")
	all := []benchConfig{
		{"default-alone", func() { n.InstallDefault(alone) }, "", false, nil},
		{"thin-0", func() { n.InstallPlexus(thin) }, "", false, nil},
		{"thin-3", func() { n.InstallPlexus(thin) }, "blue,red,green", false, nil},
		{"thick-0", func() { n.InstallPlexus(thick) }, "", false, nil},
		{"thick-3", func() { n.InstallPlexus(thick) }, "blue,red,green", false, nil},
		{"multus-thin-0", func() { n.InstallMultusThin(multusThin, kubeconfig, mcache) }, "", false, nil},
		{"multus-thin-3", func() { n.InstallMultusThin(multusThin, kubeconfig, mcache) }, "blue,red,green", false, nil},
		{"multus-thick-0", func() { n.InstallMultusThick(md) }, "", false, nil},
		{"multus-thick-3", func() { n.InstallMultusThick(md) }, "blue,red,green", false, nil},
		// Eight selections, the three NADs in turn: the delegates' share
		// at its largest, beside Multus's.
		{"thin-8", func() { n.InstallPlexus(thin) }, eightSelections, true, nil},
		{"thick-8", func() { n.InstallPlexus(thick) }, eightSelections, true, nil},
		{"multus-thin-8", func() { n.InstallMultusThin(multusThin, kubeconfig, mcache) }, eightSelections, true, nil},
		{"multus-thick-8", func() { n.InstallMultusThick(md) }, eightSelections, true, nil},
		{"thin-0-noapi", func() { n.InstallPlexus(noAPI) }, "", true, nil},
		{"thick-0-noapi", func() { n.InstallPlexus(noAPIThick) }, "", true, dNoAPI},
	}
	for i := range all {
		if all[i].name == "thick-0" || all[i].name == "thick-3" || all[i].name == "thick-8" {
			all[i].daemon = d
		}
	}
	for i := range baselines {
		w := n.PlexusWorld()
		w.Set("type", fmt.Sprintf("plexus-b%d", i+1))
		w.Set("logLevel", "info")
		all = append(all, benchConfig{name: fmt.Sprintf("thin-0-b%d", i+1), install: func() { n.InstallPlexus(w) }})
	}
	b.Cleanup(func() {
		b.ReportMetric(RSSMiB(d.Pid()), "MiB-end-plexusd")
		b.ReportMetric(RSSMiB(md.Pid()), "MiB-end-multus-daemon")
	})
	return n, selectSetups(b, all, os.Getenv("PLEXUS_BENCH_SETUPS"))
}

// binDirWith is a directory of links to every binary in harness.BinDir,
// copies of the files paths named plexus-b1, plexus-b2, ..., and links
// named for extra's keys to its values.
func binDirWith(b *testing.B, paths []string, extra map[string]string) string {
	dir := b.TempDir()
	entries, err := os.ReadDir(harness.BinDir)
	harness.Must(b, err)
	for _, e := range entries {
		harness.Must(b, os.Symlink(filepath.Join(harness.BinDir, e.Name()), filepath.Join(dir, e.Name())))
	}
	for i, p := range paths {
		data, err := os.ReadFile(p)
		harness.Must(b, err)
		harness.Must(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("plexus-b%d", i+1)), data, 0o755))
	}
	for name, target := range extra {
		link := filepath.Join(dir, name)
		_ = os.Remove(link) // harness.BinDir's entry of that name (the multus directory)
		harness.Must(b, os.Symlink(target, link))
	}
	return dir
}

// selectSetups keeps the setups named in a comma-separated list (all but
// the opt-in ones when it is empty), so a long run can compare only the
// ones in question. The default network alone is always kept: the others
// are reported against it.
func selectSetups(b *testing.B, all []benchConfig, names string) []benchConfig {
	want := strings.Split(names, ",")
	var out []benchConfig
	for _, c := range all {
		if c.name == "default-alone" || (names == "" && !c.optIn) || slices.Contains(want, c.name) {
			out = append(out, c)
		}
	}
	if len(out) == 1 {
		b.Fatalf("PLEXUS_BENCH_SETUPS=%q names no setup", names)
	}
	return out
}

const (
	benchNS = "bench"
	// eightSelections selects the bench NADs eight times, each under an
	// interface name of its own.
	eightSelections = "blue,red,green,blue,red,green,blue,red"
)

// reportMedians reports each setup's median in ms and logs every sample.
// Setups other than the default network alone also report the median of
// their paired differences from it (same iteration) in ms and in percent
// of its median: single starts vary by far more than what plexus adds, and
// pairing removes the drift the iterations share.
func reportMedians(b *testing.B, configs []benchConfig, times [][]time.Duration) {
	base := times[0]
	for j, c := range configs {
		b.ReportMetric(ms(median(times[j])), "ms-median-"+c.name)
		b.Logf("%s: %v", c.name, times[j])
		if j == 0 {
			continue
		}
		d := pairedDiff(times[j], base)
		b.ReportMetric(100*ms(median(d))/ms(median(base)), "%-added-"+c.name)
	}
	reportAdded(b, configs, times, "start")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkPodStart measures a pod's start through the API (create to
// Running, seen by a watch) on a real node, with the default network
// installed alone and with plexus thin and thick in front of the same
// default network, with 0 and 3 bridge selections. The setups are
// interleaved within every iteration, in an order drawn anew each time,
// so drift of the shared machine and the previous pod's teardown hit them
// alike; each reports its median in ms.
//
//	PLEXUS_E2E=1 go test -run '^$' -bench PodStart -benchtime 9x ./tests/node/
func BenchmarkPodStart(b *testing.B) {
	n, configs := benchSetup(b, "node-bench")
	times := make([][]time.Duration, len(configs))
	order := shuffler()
	for i := range b.N {
		for _, j := range order(len(configs)) {
			c := configs[j]
			c.install()
			name := fmt.Sprintf("%s-%d", c.name, i)
			start := time.Now()
			n.CreatePod(n.PodSpec(benchNS, name, c.networks))
			n.WaitRunning(benchNS, name)
			times[j] = append(times[j], time.Since(start))
			n.DeletePod(benchNS, name)
		}
	}
	reportMedians(b, configs, times)
}

// BenchmarkSandboxStart measures the CRI's RunPodSandbox alone (crictl
// runp: the sandbox's creation and its CNI ADD), without kubelet, for the
// same setups as BenchmarkPodStart, and StopPodSandbox (crictl stopp: its
// CNI DEL). The pod exists in the API, bound to this node as the scheduler
// would bind it, so plexusd's and multus-daemon's caches of the node's pods
// hold it (Multus waits up to 2.5 s for a pod its cache lacks); kubelet is
// stopped, so only the benchmark acts on it. After the timed
// iterations, each setup runs apiRounds more sandboxes counting the API
// requests of each ADD and DEL (api-add-*, api-del-*: medians).
//
//	PLEXUS_E2E=1 go test -run '^$' -bench SandboxStart -benchtime 15x ./tests/node/
func BenchmarkSandboxStart(b *testing.B) {
	n, configs := benchSetup(b, "node-bench")
	// kubelet would stop sandboxes of pods it does not run.
	n.StopKubelet()
	times := make([][]time.Duration, len(configs))
	cniTimes := make([][]time.Duration, len(configs))
	stopTimes := make([][]time.Duration, len(configs))
	handler := map[string][]time.Duration{}
	order := shuffler()
	for i := range b.N {
		for _, j := range order(len(configs)) {
			c := configs[j]
			c.install()
			s := n.benchSandbox(b, c, fmt.Sprintf("%s-%d", c.name, i), nil)
			times[j] = append(times[j], s.start)
			cniTimes[j] = append(cniTimes[j], s.cni)
			stopTimes[j] = append(stopTimes[j], s.stop)
			if c.daemon != nil {
				handler["add-"+c.name] = append(handler["add-"+c.name], s.handlerAdd)
				handler["publish-"+c.name] = append(handler["publish-"+c.name], s.publish)
				handler["del-"+c.name] = append(handler["del-"+c.name], s.handlerDel)
			}
		}
	}
	b.StopTimer()
	for k, ds := range handler {
		b.ReportMetric(ms(median(ds)), "ms-plexusd-"+k)
	}
	reportMedians(b, configs, times)
	reportCNI(b, configs, cniTimes, median(times[0]))
	reportAdded(b, configs, stopTimes, "stop")
	writeSamples(b, configs, times, cniTimes)
	reportRequests(b, n, configs)
}

// sandboxTimes is one sandbox's start, its CNI setup within, and its stop;
// for a thick setup also plexusd's own time serving the ADD and the DEL
// (its request duration histogram's sum before and after), which leaves
// the shim's exec and the runtime's side as the rest of the CNI time, and
// its write of network-status, which it sends after answering the ADD.
type sandboxTimes struct{ start, cni, stop, handlerAdd, publish, handlerDel time.Duration }

// benchSandbox creates the pod name for c in the API, runs its sandbox, stops and removes it and deletes the pod. With
// counts, the API requests of the ADD and of the DEL are added to it
// (keys "ADD" and "DEL").
func (n *Node) benchSandbox(b *testing.B, c benchConfig, name string, counts map[string][]float64) sandboxTimes {
	pod := n.CreatePod(n.PodSpec(benchNS, name, c.networks))
	cfg := filepath.Join(b.TempDir(), "sandbox.json")
	harness.Must(b, writeSandboxConfig(cfg, pod.Namespace, pod.Name, string(pod.UID), pod.Annotations))
	var s sandboxTimes
	var id string
	run := func() {
		h := daemonTime(c.daemon, requestSeconds, `command="ADD"`)
		pub := daemonTime(c.daemon, publishSeconds)
		start := time.Now()
		out, err := n.Crictl(b.Context(), "runp", cfg)
		s.start = time.Since(start)
		s.handlerAdd, s.publish = h(), pub()
		harness.Must(b, err)
		id = strings.TrimSpace(out)
	}
	stop := func() {
		h := daemonTime(c.daemon, requestSeconds, `command="DEL"`)
		start := time.Now()
		_, err := n.Crictl(b.Context(), "stopp", id)
		s.stop = time.Since(start)
		s.handlerDel = h()
		harness.Must(b, err)
	}
	if counts == nil {
		run()
		stop()
	} else {
		add, del := n.apiRequests(b, run), n.apiRequests(b, stop)
		b.Logf("API requests, %s: ADD %v, DEL %v", name, add, del)
		counts["ADD"] = append(counts["ADD"], sumCounts(add))
		counts["DEL"] = append(counts["DEL"], sumCounts(del))
	}
	cni, err := n.SandboxCNITime(id, pod.Namespace, pod.Name)
	harness.Must(b, err)
	s.cni = cni
	_, err = n.Crictl(b.Context(), "rmp", id)
	harness.Must(b, err)
	// At once: no kubelet runs to finish a graceful deletion.
	harness.Must(b, n.Client.CoreV1().Pods(benchNS).Delete(b.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	return s
}

// plexusd's histograms of its time serving CNI calls and writing
// network-status (sums, in seconds).
const (
	requestSeconds = "plexus_request_duration_seconds_sum"
	publishSeconds = "plexus_status_publish_duration_seconds_sum"
)

// daemonTime starts timing with one of d's histograms: the returned
// function is the time the histogram's sum (of the series matching
// filters) gained since (0 without a daemon).
func daemonTime(d *harness.Daemon, sum string, filters ...string) func() time.Duration {
	if d == nil {
		return func() time.Duration { return 0 }
	}
	before := d.Metric(sum, filters...)
	return func() time.Duration {
		return time.Duration((d.Metric(sum, filters...) - before) * float64(time.Second))
	}
}

// apiRounds is how many sandboxes per setup reportRequests counts.
const apiRounds = 3

// reportRequests runs apiRounds sandboxes per setup, one at a time and
// untimed, and reports the median of the API requests each ADD and each
// DEL made (kube-apiserver's own counts; see apiRequests).
func reportRequests(b *testing.B, n *Node, configs []benchConfig) {
	for _, c := range configs {
		c.install()
		counts := map[string][]float64{}
		for i := range apiRounds {
			n.benchSandbox(b, c, fmt.Sprintf("%s-api-%d", c.name, i), counts)
		}
		for _, op := range []string{"ADD", "DEL"} {
			v := slices.Clone(counts[op])
			slices.Sort(v)
			b.ReportMetric(v[len(v)/2], "api-"+strings.ToLower(op)+"-"+c.name)
		}
	}
}

// writeSamples writes every sample as CSV (iteration, setup, sandbox start
// ms, CNI setup ms) to the file PLEXUS_BENCH_CSV names, for analyses the
// reported medians do not give (go test truncates a benchmark's log).
func writeSamples(b *testing.B, configs []benchConfig, times, cniTimes [][]time.Duration) {
	path := os.Getenv("PLEXUS_BENCH_CSV")
	if path == "" {
		return
	}
	var sb strings.Builder
	sb.WriteString("iteration,setup,start_ms,cni_ms\n")
	for j, c := range configs {
		for i := range times[j] {
			fmt.Fprintf(&sb, "%d,%s,%.3f,%.3f\n", i, c.name, ms(times[j][i]), ms(cniTimes[j][i]))
		}
	}
	harness.Must(b, os.WriteFile(path, []byte(sb.String()), 0o644))
}

// reportCNI reports the CNI setup within each sandbox start, as containerd
// timed it (loopback and the installed network: the part plexus changes),
// with the median of the paired differences from the default network
// alone in ms and in percent of the default network's sandbox start. The
// rest of a sandbox start varies by more than plexus adds; this part does
// not.
func reportCNI(b *testing.B, configs []benchConfig, times [][]time.Duration, start time.Duration) {
	for j, c := range configs {
		b.ReportMetric(ms(median(times[j])), "ms-cni-median-"+c.name)
		b.Logf("CNI setup %s: %v", c.name, times[j])
		if j == 0 {
			continue
		}
		added := median(pairedDiff(times[j], times[0]))
		b.ReportMetric(100*ms(added)/ms(start), "%-of-start-cni-added-"+c.name)
	}
	reportAdded(b, configs, times, "cni")
}

// reportAdded reports, for every setup but the default network alone, the
// median of its paired differences from it (ms-<what>-added-<setup>) with
// a 95% bootstrap interval (-lo, -hi); and for every plexus setup whose
// Multus peer (the same name prefixed "multus-") ran, the ratio of their
// medians (ratio-<what>-<setup>), its interval from the same resamples of
// the iterations.
func reportAdded(b *testing.B, configs []benchConfig, times [][]time.Duration, what string) {
	index := map[string]int{}
	for j, c := range configs {
		index[c.name] = j
	}
	for j, c := range configs {
		if j == 0 {
			continue
		}
		d := pairedDiff(times[j], times[0])
		lo, hi := bootstrap(len(d), func(idx []int) float64 { return ms(median(pick(d, idx))) })
		b.ReportMetric(ms(median(d)), "ms-"+what+"-added-"+c.name)
		b.ReportMetric(lo, "ms-"+what+"-added-lo-"+c.name)
		b.ReportMetric(hi, "ms-"+what+"-added-hi-"+c.name)
		k, ok := index["multus-"+c.name]
		if !ok {
			continue
		}
		peer := pairedDiff(times[k], times[0])
		ratio := func(idx []int) float64 { return ms(median(pick(d, idx))) / ms(median(pick(peer, idx))) }
		lo, hi = bootstrap(len(d), ratio)
		b.ReportMetric(ratio(nil), "ratio-"+what+"-"+c.name)
		b.ReportMetric(lo, "ratio-"+what+"-lo-"+c.name)
		b.ReportMetric(hi, "ratio-"+what+"-hi-"+c.name)
	}
}

// pick is ds at the indices idx (all of ds for nil).
func pick(ds []time.Duration, idx []int) []time.Duration {
	if idx == nil {
		return ds
	}
	out := make([]time.Duration, len(idx))
	for i, k := range idx {
		out[i] = ds[k]
	}
	return out
}

// bootstrap is the 95% percentile interval of stat over 2,000 resamples
// (with replacement, fixed seed) of n iterations.
func bootstrap(n int, stat func(idx []int) float64) (lo, hi float64) {
	const rounds = 2000
	r := rand.New(rand.NewPCG(27, 27))
	vals := make([]float64, rounds)
	idx := make([]int, n)
	for i := range vals {
		for k := range idx {
			idx[k] = r.IntN(n)
		}
		vals[i] = stat(idx)
	}
	slices.Sort(vals)
	return vals[rounds*25/1000], vals[rounds*975/1000-1]
}

// pairedDiff is each iteration's a minus its b.
func pairedDiff(a, b []time.Duration) []time.Duration {
	d := make([]time.Duration, len(a))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	return d
}

// writeSandboxConfig writes crictl's pod sandbox config: the metadata
// kubelet would send (containerd derives CNI_ARGS from it) and the pod's
// annotations.
func writeSandboxConfig(path, namespace, name, uid string, annotations map[string]string) error {
	data, err := json.Marshal(map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": namespace, "uid": uid, "attempt": 0},
		"annotations":   annotations,
		"log_directory": filepath.Dir(path),
		"linux":         map[string]any{},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// shuffler returns each iteration's order of the setups, drawn anew from
// a fixed seed: a start pays for the kernel work its predecessor left
// behind (a 3-selection pod's veths being freed), so a fixed order would
// charge that to whichever setup always follows one.
func shuffler() func(n int) []int {
	r := rand.New(rand.NewPCG(14, 14))
	return r.Perm
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
