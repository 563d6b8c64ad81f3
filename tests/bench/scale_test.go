package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/core/source/kube"
	"github.com/plexus-cni/plexus/core/source/kube/cached"
	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// apiCounter counts what one simulated node's plexusd asks of the API:
// requests by kind (LIST, WATCH, GET, other) and the bytes of every
// response body, watch streams included.
type apiCounter struct {
	lists, watches, gets, others atomic.Int64
	bytes                        atomic.Int64
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch q := r.URL.Query(); {
		case r.Method != http.MethodGet:
			c.others.Add(1)
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			c.watches.Add(1)
		case strings.Count(strings.Trim(r.URL.Path, "/"), "/")%2 == 1 && !strings.HasSuffix(r.URL.Path, "/pods") && !strings.HasSuffix(r.URL.Path, "/network-attachment-definitions"):
			c.gets.Add(1)
		default:
			c.lists.Add(1)
		}
		resp, err := rt.RoundTrip(r)
		if err == nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// scaleCluster is the simulated cluster: pods bound to fake nodes (they
// never run) and NADs, spread over namespaces.
type scaleCluster struct {
	b          *testing.B
	env        *kubeenv.Env
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	namespaces int
	pods, nads int
}

// scaleNADConfig is a typical NAD: a macvlan with host-local IPAM and a route,
// about 300 bytes.
func scaleNADConfig(name string) string {
	return `{"cniVersion":"1.0.0","name":"` + name + `","type":"macvlan","master":"eth0","mode":"bridge",` +
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.0.0/16","rangeStart":"10.10.1.10","rangeEnd":"10.10.1.250"}]],` +
		`"routes":[{"dst":"192.168.0.0/16"}]}}`
}

// growTo adds NADs and pods until the cluster has nads and pods, 32 at a
// time; pod i is bound to node sim-(i / perNode).
func (s *scaleCluster) growTo(nads, pods, perNode int) {
	s.b.Helper()
	run := func(from, to int, create func(context.Context, int) error) {
		var wg sync.WaitGroup
		var first atomic.Value
		next := atomic.Int64{}
		next.Store(int64(from))
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= to {
						return
					}
					if err := create(s.b.Context(), i); err != nil {
						first.CompareAndSwap(nil, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, ok := first.Load().(error); ok {
			s.b.Fatal(err)
		}
	}
	run(s.nads, nads, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("net-%d", i)
		return kubeenv.CreateNAD(ctx, s.dyn, s.ns(i), name, scaleNADConfig(name))
	})
	s.nads = nads
	run(s.pods, pods, func(ctx context.Context, i int) error {
		ns := s.ns(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: ns,
				Labels:      map[string]string{"app": "sim", "shard": strconv.Itoa(i % 7)},
				Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": fmt.Sprintf("net-%d,net-%d", i%max(nads, 1), (i+1)%max(nads, 1))}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("sim-%d", i/perNode),
				Containers: []corev1.Container{{Name: "c", Image: "example.invalid/app:1", Command: []string{"/app", "--serve"}}}},
		}
		_, err := s.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	s.pods = pods
}

func (s *scaleCluster) ns(i int) string { return fmt.Sprintf("team-%d", i%s.namespaces) }

// scaleResult is what the caches of count simulated nodes cost, per node.
type scaleResult struct {
	nodes                      int
	syncMedian, syncMax        time.Duration
	lists, watches, gets       float64 // requests per node to sync
	kibPerNode, heapKiBPerNode float64
}

// measureCaches starts plexusd's cached source for nodes sim-0..sim-(count-1)
// at once (a control plane restart: every node relists) and waits until all
// are synced; it returns per-node means and keeps the caches running until
// stop is called.
func (s *scaleCluster) measureCaches(count int) (scaleResult, []*apiCounter, func()) {
	s.b.Helper()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(s.b.Context())
	counters := make([]*apiCounter, count)
	syncs := make([]time.Duration, count)
	var wg sync.WaitGroup
	for i := range count {
		counters[i] = &apiCounter{}
		cfg := rest.CopyConfig(s.env.AdminConfig())
		cfg.Wrap(counters[i].wrap)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			src, err := cached.New(ctx, cfg, fmt.Sprintf("sim-%d", i), kube.Options{})
			if err != nil {
				s.b.Error(err)
				return
			}
			if !src.WaitForSync(ctx) {
				s.b.Error("cache did not sync")
			}
			syncs[i] = time.Since(start)
		}()
	}
	wg.Wait()
	// Let the watches settle into their steady state before reading.
	time.Sleep(time.Second)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r := scaleResult{nodes: count}
	for i, c := range counters {
		r.lists += float64(c.lists.Load())
		r.watches += float64(c.watches.Load())
		r.gets += float64(c.gets.Load())
		r.kibPerNode += float64(c.bytes.Load()) / 1024
		r.syncMax = max(r.syncMax, syncs[i])
	}
	n := float64(count)
	r.lists, r.watches, r.gets, r.kibPerNode = r.lists/n, r.watches/n, r.gets/n, r.kibPerNode/n
	r.heapKiBPerNode = (float64(after.HeapInuse) - float64(before.HeapInuse)) / 1024 / n
	r.syncMedian = medianOf(syncs)
	return r, counters, cancel
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkClusterScale simulates many nodes' plexusd against one
// kube-apiserver: each simulated node runs plexusd's cached source (its
// pods by spec.nodeName, every NAD), in this process, with its own client
// whose transport counts its requests and the bytes it reads. The cluster
// grows from 100 NADs and 1,000 pods on 10 fake nodes to 1,000 NADs and
// 10,000 pods on 100 (pods that never run, 100 per node, in 100
// namespaces); at each step the caches of nodes sim-0 to sim-9 start at
// once, and at the end those of all 100. Then, with 100 caches running,
// 1,000 pods are created on other nodes and 10 NADs: the bytes each cache
// reads show what churn elsewhere costs a node.
//
//	PLEXUS_E2E=1 go test -run '^$' -bench ClusterScale -benchtime 1x -timeout 30m ./tests/bench/
func BenchmarkClusterScale(b *testing.B) {
	if os.Getenv(kubeenv.E2EEnv) != "1" {
		b.Skipf("set %s=1: starts etcd and kube-apiserver", kubeenv.E2EEnv)
	}
	env := kubeenv.ForTest(b, kubeenv.Options{})
	admin := env.AdminConfig()
	admin.QPS, admin.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(admin)
	harness.Must(b, err)
	dyn, err := dynamic.NewForConfig(admin)
	harness.Must(b, err)
	crd, err := filepath.Abs("../../deploy/base/crd.yaml")
	harness.Must(b, err)
	harness.Must(b, env.Apply(b.Context(), false, crd))
	s := &scaleCluster{b: b, env: env, cs: cs, dyn: dyn, namespaces: 100}
	for i := range s.namespaces {
		harness.Must(b, env.CreateNamespace(b.Context(), s.ns(i), nil))
	}
	const nodes, podsPerNode = 100, 100
	report := func(label string, r scaleResult) {
		b.Logf("%-28s %3d nodes: sync median %v max %v; per node %.1f LIST %.1f WATCH %.1f GET, %.0f KiB read, %.0f KiB heap",
			label, r.nodes, r.syncMedian.Round(time.Millisecond), r.syncMax.Round(time.Millisecond), r.lists, r.watches, r.gets, r.kibPerNode, r.heapKiBPerNode)
	}
	for b.Loop() {
		// 100 pods per node throughout: the cluster grows by nodes.
		for _, step := range []struct{ nads, pods int }{{100, 1000}, {1000, 1000}, {1000, 10000}} {
			start := time.Now()
			s.growTo(step.nads, step.pods, podsPerNode)
			b.Logf("cluster: %d NADs, %d pods (grown in %v)", s.nads, s.pods, time.Since(start).Round(time.Second))
			r, _, stop := s.measureCaches(10)
			stop()
			report(fmt.Sprintf("%d NADs, %d pods", s.nads, s.pods), r)
		}
		r, counters, stop := s.measureCaches(nodes)
		report("all nodes at once", r)
		b.ReportMetric(r.kibPerNode, "KiB-read-per-node-sync")
		b.ReportMetric(r.heapKiBPerNode, "KiB-heap-per-node")
		b.ReportMetric(float64(r.syncMedian.Milliseconds()), "ms-sync-median")
		b.ReportMetric(float64(r.syncMax.Milliseconds()), "ms-sync-max-100-nodes")
		b.ReportMetric(r.lists+r.watches+r.gets, "requests-per-node-sync")
		s.churn(counters)
		stop()
	}
}

// churn creates 1,000 pods on nodes without a cache (sim-100 to sim-109)
// and 10 NADs, and reports what the running caches read meanwhile.
func (s *scaleCluster) churn(counters []*apiCounter) {
	s.b.Helper()
	before := make([]int64, len(counters))
	for i, c := range counters {
		before[i] = c.bytes.Load()
	}
	s.growTo(s.nads+10, s.pods+1000, 100)
	time.Sleep(2 * time.Second)
	var total int64
	for i, c := range counters {
		total += c.bytes.Load() - before[i]
	}
	per := float64(total) / float64(len(counters)) / 1024
	s.b.Logf("churn (10 NADs, 1,000 pods on other nodes): %.1f KiB read per node", per)
	s.b.ReportMetric(per, "KiB-read-per-node-churn")
}
