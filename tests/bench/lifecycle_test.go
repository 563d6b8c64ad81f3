package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/tests/harness"
)

// setup is one benchmark's world: n selections over three NADs (two
// bridge/host-local confs and a conflist with tuning), as the issue's
// reference pod has them.
type setup struct {
	w         *harness.World
	c         *harness.Container
	nads      [][]byte // the delegate config of each selection, in order
	defConf   []byte
	selection string
}

func newSetup(b *testing.B, n int) *setup {
	w := harness.New(b)
	// Log as deployed (info): the harness's debug level is for tests.
	w.Set("logLevel", "info")
	names := []string{"net-a", "net-b", "net-c"}
	w.BridgeNAD("demo", "net-a")
	w.BridgeNAD("demo", "net-b")
	conflist := `{"cniVersion":"1.0.0","name":"net-c","plugins":[{"type":"bridge","bridge":"` + w.Bridge() + `","ipam":{"type":"host-local","subnet":"` + harness.Subnet() + `","dataDir":"` + w.IPAMDir + `"}},{"type":"tuning","sysctl":{"net.ipv4.conf.all.log_martians":"1"}}]}`
	w.NAD("demo", "net-c", conflist)
	s := &setup{w: w}
	sel := make([]string, n)
	for i := range sel {
		sel[i] = names[i%3]
		s.nads = append(s.nads, nadConfig(b, w, names[i%3]))
	}
	s.selection = strings.Join(sel, ",")
	w.Pod("demo", "bench", s.selection)
	s.c = w.Container("demo", "bench")
	var err error
	s.defConf, err = os.ReadFile(filepath.Join(w.Dir, "default.conflist"))
	harness.Must(b, err)
	return s
}

// deployedArgs are plexusd's flags as deploy/ sets them: the info log
// level (the harness's is debug), and delegates chrooted to the host's /
// (--delegate-root), which this process's root stands for, as in
// tests/node. PLEXUS_BENCH_DELEGATE_ROOT=off runs the delegates unchrooted,
// for the mechanism's cost beside the same run.
func deployedArgs() []string {
	args := []string{"--log-level", "info"}
	if os.Getenv("PLEXUS_BENCH_DELEGATE_ROOT") != "off" {
		args = append(args, fmt.Sprintf("--delegate-root=/proc/%d/root", os.Getpid()))
	}
	return args
}

// nadConfig reads back the spec.config the harness wrote.
func nadConfig(b *testing.B, w *harness.World, name string) []byte {
	raw, err := os.ReadFile(filepath.Join(w.Manifests, "nad-demo-"+name+".yaml"))
	harness.Must(b, err)
	i := strings.Index(string(raw), "config: ")
	var cfg string
	harness.Must(b, json.Unmarshal([]byte(strings.TrimSpace(string(raw[i+len("config: "):]))), &cfg))
	return []byte(cfg)
}

// list turns a conf or conflist into what libcni runs.
func list(b *testing.B, raw []byte) *libcni.NetworkConfigList {
	l, err := netconf.ConfList(raw)
	harness.Must(b, err)
	return l
}

// BenchmarkLifecycleFloor: ADD then DEL of the default network and every
// selection, through libcni, in this process: what any meta-plugin costs
// at least.
func BenchmarkLifecycleFloor(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("selections=%d", n), func(b *testing.B) {
			s := newSetup(b, n)
			cni := libcni.NewCNIConfigWithCacheDir([]string{harness.BinDir}, s.w.CacheDir, nil)
			lists := []*libcni.NetworkConfigList{list(b, s.defConf)}
			for _, raw := range s.nads {
				lists = append(lists, list(b, raw))
			}
			args := [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "bench"}}
			rts := make([]*libcni.RuntimeConf, len(lists))
			for i := range lists {
				rts[i] = &libcni.RuntimeConf{ContainerID: "floor", NetNS: s.c.NS.Path(), IfName: fmt.Sprintf("net%d", i), Args: args}
			}
			rts[0].IfName = "eth0"
			ctx := context.Background()
			for b.Loop() {
				for i, l := range lists {
					if _, err := cni.AddNetworkList(ctx, l, rts[i]); err != nil {
						b.Fatal(err)
					}
				}
				for i := len(lists) - 1; i >= 0; i-- {
					if err := cni.DelNetworkList(ctx, lists[i], rts[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkLifecycleThin: the runtime (libcni, as cnitool and containerd
// use it) invokes plexus, which runs the whole pipeline per call.
func BenchmarkLifecycleThin(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("selections=%d", n), func(b *testing.B) {
			s := newSetup(b, n)
			runtimeLifecycle(b, s)
		})
	}
}

// stageVariants are the optional stages a lifecycle runs with.
var stageVariants = []struct {
	name              string
	policy, extension bool
}{{"policy", true, false}, {"extension", false, true}, {"policy+extension", true, true}}

// BenchmarkLifecycleThinStages: 1, 4 and 16 selections with the policy
// library (every rule on), with one extension key, and with both; compare
// with BenchmarkLifecycleThin and the floor.
func BenchmarkLifecycleThinStages(b *testing.B) {
	benchStages(b, false)
}

func benchStages(b *testing.B, thick bool) {
	for _, v := range stageVariants {
		for _, n := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/selections=%d", v.name, n), func(b *testing.B) {
				s := newSetup(b, n)
				if v.policy {
					usePolicy(b, s)
				}
				if v.extension {
					useExtension(b, s)
				}
				if thick {
					s.w.StartDaemon(deployedArgs()...)
				}
				runtimeLifecycle(b, s)
			})
		}
	}
}

// usePolicy enables every rule of the shipped library in a way that allows
// the benchmark pod.
func usePolicy(b *testing.B, s *setup) {
	s.w.UseLibraryPolicy("admin.yaml", `plexus:
  config:
    namespace_isolation: {enabled: true, global_namespaces: [shared]}
    nad_allowlist: {enabled: true}
    max_attachments: {enabled: true, max: 32}
    static_ip_range: {enabled: true, namespaces: {demo: ["10.0.0.0/8"]}}
    mac_request: {enabled: true, namespaces: [demo]}
    interface_request: {enabled: true, namespaces: [demo]}
`)
}

// useExtension loads the overrides module and puts its key on the first
// selection; the compilation cache is filled by a first, unmeasured ADD.
func useExtension(b *testing.B, s *setup) {
	mod := filepath.Join(os.Getenv("PLEXUS_BIN"), "extensions", "overrides.wasm")
	if _, err := os.Stat(mod); err != nil {
		b.Skipf("extension modules not built (make build): %v", err)
	}
	s.w.Set("extensions", map[string]any{"modules": []any{
		map[string]any{"path": mod, "config": map[string]any{"allow": []string{"mtu"}}},
	}})
	sel := strings.Split(s.selection, ",")
	parts := []string{`{"name":"` + sel[0] + `","io.plexus.overrides":{"mtu":1400}}`}
	for _, n := range sel[1:] {
		parts = append(parts, `{"name":"`+n+`"}`)
	}
	s.w.Pod("demo", "bench", "["+strings.Join(parts, ",")+"]")
}

func runtimeLifecycle(b *testing.B, s *setup) {
	add, del := plexusSteps(b, s, "thin")
	// One unmeasured lifecycle warms caches (extension compilation cache).
	add()
	del()
	for b.Loop() {
		add()
		del()
	}
}

// BenchmarkLifecycleThick: the runtime invokes the plexus shim, which
// forwards to plexusd (caches, compiled policy and modules).
func BenchmarkLifecycleThick(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("selections=%d", n), func(b *testing.B) {
			s := newSetup(b, n)
			s.w.StartDaemon(deployedArgs()...)
			runtimeLifecycle(b, s)
		})
	}
}

// BenchmarkLifecycleThickStages: the thick counterpart of
// BenchmarkLifecycleThinStages; policy+extension with 4 selections is the
// issue's reference pod (4 selections of 3 NADs, one policy, one
// extension key).
func BenchmarkLifecycleThickStages(b *testing.B) {
	benchStages(b, true)
}

// BenchmarkRatioReferencePod interleaves, in every iteration, the floor
// and plexus (thin and thick), in an order drawn anew each time (seeded),
// for the reference pod: 4
// selections of 3 NADs, the policy library, one extension key. Alternating
// cancels the drift of a shared machine that separate benchmarks suffer;
// it reports each mean and the ratios of the means to the floor's, and the
// median of the per-iteration ratios, which one slow iteration (a kernel
// that takes long to delete a veth, say) does not move.
func BenchmarkRatioReferencePod(b *testing.B) {
	s := newSetup(b, 4)
	usePolicy(b, s)
	useExtension(b, s)
	pause := settlePause(b)
	floorAdd, floorDel := floorSteps(b, s)
	thinAdd, thinDel := plexusSteps(b, s, "thin")
	d := s.w.StartDaemon(deployedArgs()...)
	thickAdd, thickDel := plexusSteps(b, s, "thick")
	var tf, tt, tk []time.Duration
	runs := []struct {
		add, del func()
		t        *[]time.Duration
	}{{floorAdd, floorDel, &tf}, {thinAdd, thinDel, &tt}, {thickAdd, thickDel, &tk}}
	for _, r := range runs[1:] { // warm the extension compilation caches
		r.add()
		r.del()
	}
	// A lifecycle pays for kernel work its predecessor left (veths being
	// freed, say), so each iteration runs the three in a new order.
	order := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		order.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		for _, r := range runs {
			*r.t = append(*r.t, settled(pause, r.add, r.del))
		}
	}
	// The policy decisions plexusd made while serving (its histogram):
	// the share that finished within 200µs, the decision goal's bound.
	const decision = "plexus_policy_decision_duration_seconds"
	if n := d.Metric(decision + "_count"); n > 0 {
		b.ReportMetric(100*d.Metric(decision+"_bucket", `le="0.0002"`)/n, "%decisions≤200µs")
	}
	b.ReportMetric(mean(tf).Seconds()*1e3, "floor-ms")
	b.ReportMetric(mean(tt).Seconds()*1e3, "thin-ms")
	b.ReportMetric(mean(tk).Seconds()*1e3, "thick-ms")
	b.ReportMetric(float64(mean(tt))/float64(mean(tf)), "thin/floor")
	b.ReportMetric(float64(mean(tk))/float64(mean(tf)), "thick/floor")
	b.ReportMetric(medianRatio(tt, tf), "thin/floor-median")
	b.ReportMetric(medianRatio(tk, tf), "thick/floor-median")
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// medianRatio is the median of a[i]/b[i].
func medianRatio(a, b []time.Duration) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = float64(a[i]) / float64(b[i])
	}
	slices.Sort(r)
	if n := len(r); n%2 == 0 {
		return (r[n/2-1] + r[n/2]) / 2
	}
	return r[len(r)/2]
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// settled is one lifecycle's ADD time plus its DEL time, each call
// after pause (settlePause says why).
func settled(pause time.Duration, add, del func()) time.Duration {
	time.Sleep(pause)
	t := timed(add)
	time.Sleep(pause)
	return t + timed(del)
}

// floorSteps are the ADD and the DEL of s's networks as a runtime would run
// them itself, through libcni: the delegates' own cost.
func floorSteps(b *testing.B, s *setup) (add, del func()) {
	cni := libcni.NewCNIConfigWithCacheDir([]string{harness.BinDir}, s.w.CacheDir, nil)
	lists := []*libcni.NetworkConfigList{list(b, s.defConf)}
	for _, raw := range s.nads {
		lists = append(lists, list(b, raw))
	}
	args := [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "bench"}}
	rt := func(i int) *libcni.RuntimeConf {
		r := &libcni.RuntimeConf{ContainerID: "floor", NetNS: s.c.NS.Path(), IfName: fmt.Sprintf("net%d", i), Args: args}
		if i == 0 {
			r.IfName = "eth0"
		}
		return r
	}
	ctx := context.Background()
	add = func() {
		for i, l := range lists {
			if _, err := cni.AddNetworkList(ctx, l, rt(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	del = func() {
		for i := len(lists) - 1; i >= 0; i-- {
			if err := cni.DelNetworkList(ctx, lists[i], rt(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	return add, del
}

// plexusRunner is one lifecycle through plexus with the World's config as
// it is now (thin, or thick after StartDaemon).
func plexusRunner(b *testing.B, s *setup, id string) func() {
	add, del := plexusSteps(b, s, id)
	run := func() { add(); del() }
	run() // warm the extension compilation cache
	return run
}

// plexusSteps are the ADD and the DEL of one container through plexus, as
// the runtime invokes it, with the World's config as it is now.
func plexusSteps(b *testing.B, s *setup, id string) (add, del func()) {
	conf, err := json.Marshal(s.w.Plexus)
	harness.Must(b, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{harness.BinDir}, filepath.Join(s.w.Dir, "runtime-"+id), nil)
	return listSteps(b, cni, list(b, conf), podRuntimeConf(s, id), "plexus "+id)
}

// podRuntimeConf is the benchmark pod's container id on eth0, with the
// pod's CNI_ARGS as the runtime sends them.
func podRuntimeConf(s *setup, id string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: s.c.NS.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "bench"}}}
}

// listSteps are the ADD and the DEL of the network list l as the runtime
// runs them through cni; what names the setup when one fails.
func listSteps(b *testing.B, cni *libcni.CNIConfig, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf, what string) (add, del func()) {
	ctx := context.Background()
	add = func() {
		if _, err := cni.AddNetworkList(ctx, l, rt); err != nil {
			b.Fatalf("%s ADD: %v", what, err)
		}
	}
	del = func() {
		if err := cni.DelNetworkList(ctx, l, rt); err != nil {
			b.Fatalf("%s DEL: %v", what, err)
		}
	}
	return add, del
}
