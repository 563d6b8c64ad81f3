package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"

	"github.com/plexus-cni/plexus/cmd/internal/agent"
	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	"github.com/plexus-cni/plexus/core/api/client/informers/externalversions"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// BenchmarkFleetPolicyPush runs K simulated nodes in this process against
// a real kube-apiserver, each running the node agent (the policy watch,
// verification and activation, the PlexusNode reporter, the event
// recorder) as the thin installer wires it, with its own node-bound identity (the plexus ServiceAccount
// impersonated with the node-name extra, which deploy/base's admission
// checks), then pushes one new generation of the AttachmentPolicy and
// measures what that push costs the API server and how fast the fleet
// follows. Verification is shared by content among the simulated nodes
// (two cores cannot verify K revisions as K machines would): its time is
// reported once, as verify-ms. K comes from PLEXUS_FLEET_NODES
// (comma-separated; default 100,1000,5000).
func BenchmarkFleetPolicyPush(b *testing.B) {
	if os.Getenv(kubeenv.E2EEnv) != "1" {
		b.Skipf("set %s=1: starts etcd and kube-apiserver", kubeenv.E2EEnv)
	}
	for _, k := range fleetSizes(b) {
		b.Run("nodes="+strconv.Itoa(k), func(b *testing.B) {
			for range b.N {
				runFleetPush(b, k)
			}
		})
	}
}

func fleetSizes(b *testing.B) []int {
	spec := os.Getenv("PLEXUS_FLEET_NODES")
	if spec == "" {
		return []int{100, 1000, 5000}
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k <= 0 {
			b.Fatalf("PLEXUS_FLEET_NODES %q: %q is not a node count", spec, f)
		}
		out = append(out, k)
	}
	return out
}

// fleet is one run's API server, simulated nodes and observations.
type fleet struct {
	b       *testing.B
	env     *kubeenv.Env
	admin   versioned.Interface
	dir     string
	engines *sharedEngines
	// rt is the connection pool the simulated nodes share.
	rt http.RoundTripper
	// received and activated record when each node's watch handed it a
	// generation and when it had put it in force.
	mu                  sync.Mutex
	received, activated map[string]map[int64]time.Time
}

func runFleetPush(b *testing.B, k int) {
	b.StopTimer()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	f := startFleetAPI(b)
	f.createPolicy(ctx, 1)
	for i := range k {
		f.startNode(ctx, fmt.Sprintf("node-%05d", i))
	}
	reported := f.watchReports(ctx)
	reported.waitAll(b, k, 1, 10*time.Minute)
	// The reporters write at most every nodestate.DefaultMinInterval:
	// start the push from a fleet whose last writes are older.
	time.Sleep(2 * nodestate.DefaultMinInterval)
	before := f.scrape(ctx)

	b.StartTimer()
	pushed := time.Now()
	f.createPolicy(ctx, 2)
	reported.waitAll(b, k, 2, 10*time.Minute)
	b.StopTimer()
	// Requests counted as they complete: let the last ones land.
	time.Sleep(2 * time.Second)
	after := f.scrape(ctx)
	f.report(b, k, pushed, reported, before, after)
}

func startFleetAPI(b *testing.B) *fleet {
	env := kubeenv.ForTest(b, kubeenv.Options{})
	ctx := b.Context()
	if err := env.Apply(ctx, false, kubeenv.DeployFile(b, "base/plexus-crds.yaml"), kubeenv.DeployFile(b, "base/rbac.yaml"), kubeenv.DeployFile(b, "base/admission.yaml")); err != nil {
		b.Fatal(err)
	}
	admin, err := versioned.NewForConfig(env.AdminConfig())
	if err != nil {
		b.Fatal(err)
	}
	rt, err := rest.TransportFor(env.AdminConfig())
	if err != nil {
		b.Fatal(err)
	}
	f := &fleet{b: b, env: env, admin: admin, dir: b.TempDir(), engines: &sharedEngines{m: map[string]*sharedEngine{}},
		rt: rt, received: map[string]map[int64]time.Time{}, activated: map[string]map[int64]time.Time{}}
	// A node starts verifying a generation as soon as its watch delivered
	// it: that is when it received it. Its state directory names it.
	f.engines.started = func(dir string) {
		rel, err := filepath.Rel(f.dir, dir)
		if err != nil {
			return
		}
		node, _, _ := strings.Cut(rel, string(filepath.Separator))
		f.receivedAt(node, generationOf(filepath.Base(dir)))
	}
	return f
}

// createPolicy writes generation gen of AttachmentPolicy "cluster": the
// baseline, with the namespaces whose networks every pod may use changed
// from one generation to the next.
func (f *fleet) createPolicy(ctx context.Context, gen int64) {
	b := f.b
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "policies", "baseline.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	data := strings.Replace(string(raw), "global_namespaces: [default]", fmt.Sprintf("global_namespaces: [default, shared-%d]", gen), 1)
	api := f.admin.PlexusV1alpha1().AttachmentPolicies()
	spec := plexusapi.AttachmentPolicySpec{Data: map[string]string{"baseline.yaml": data}}
	if gen == 1 {
		_, err = api.Create(ctx, &plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Spec: spec}, metav1.CreateOptions{})
	} else {
		var p *plexusapi.AttachmentPolicy
		if p, err = api.Get(ctx, "cluster", metav1.GetOptions{}); err == nil {
			p.Spec = spec
			_, err = api.Update(ctx, p, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		b.Fatalf("writing generation %d: %v", gen, err)
	}
}

// nodeClients are the plexus ServiceAccount bound to node, as a projected
// token of a pod on that node is: the admission policies read the node
// from the node-name extra. Every simulated node impersonates it over the
// one connection pool of this process: a real node has its own
// connection, and K of them would spend this machine's cores on TLS.
func (f *fleet) nodeClients(node string) (versioned.Interface, kubernetes.Interface) {
	b := f.b
	cfg := rest.CopyConfig(f.env.AdminConfig())
	cfg.QPS, cfg.Burst = 5, 10 // client-go's defaults, as the agents run
	imp := transport.ImpersonationConfig{
		UserName: "system:serviceaccount:kube-system:plexus",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	hc := &http.Client{Transport: transport.NewImpersonatingRoundTripper(imp, f.rt)}
	px, err := versioned.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	core, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	return px, core
}

// startNode runs one node's agent as the installer does.
func (f *fleet) startNode(ctx context.Context, node string) {
	b := f.b
	px, core := f.nodeClients(node)
	library, _ := filepath.Abs(filepath.Join("..", "..", "..", "policies", "library"))
	baseline, _ := filepath.Abs(filepath.Join("..", "..", "..", "policies", "baseline.yaml"))
	sync, err := revision.New(revision.Options{
		Config:    policies.Config{Paths: []string{library}, Object: &policies.ObjectConfig{Name: "cluster", StateDir: filepath.Join(f.dir, node), DefaultPaths: []string{baseline}}},
		NewEngine: f.engines.New, VerifyEngine: f.engines.Verify,
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sync.Start(ctx); err != nil {
		b.Fatal(err)
	}
	a, err := agent.New(agent.Options{Core: core, Options: nodestate.Options{
		Client: px, Node: node, FieldManager: nodestate.ManagerInstaller, Mode: nodestate.ModeThin, Version: "fleet",
		Install: func() nodestate.Install {
			return nodestate.Install{ConfigInstalled: true, ConfigPath: "/etc/cni/net.d/00-plexus.conflist", DefaultNetwork: "pod-net"}
		},
	}})
	if err != nil {
		b.Fatal(err)
	}
	err = a.Follow(ctx, sync, func(res revision.Result, _ error) { f.activatedAt(node, res.State.Generation) })
	if err != nil {
		b.Fatal(err)
	}
	go a.Run(ctx)
}

func (f *fleet) receivedAt(node string, gen int64) { f.note(f.received, node, gen) }

func (f *fleet) activatedAt(node string, gen int64) { f.note(f.activated, node, gen) }

func (f *fleet) note(m map[string]map[int64]time.Time, node string, gen int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m[node] == nil {
		m[node] = map[int64]time.Time{}
	}
	if _, ok := m[node][gen]; !ok {
		m[node][gen] = time.Now()
	}
}

// generationOf reads the generation from a revision's name,
// GENERATION-DIGEST; 0 for another name.
func generationOf(rev string) int64 {
	g, _, _ := strings.Cut(rev, "-")
	n, _ := strconv.ParseInt(g, 10, 64)
	return n
}

// reports follows the PlexusNodes, as one admin tool would: when each
// node first reported each generation in force.
type reports struct {
	mu   sync.Mutex
	seen map[int64]map[string]time.Time
	// size is the largest PlexusNode seen, in bytes of JSON.
	size int
}

func (f *fleet) watchReports(ctx context.Context) *reports {
	r := &reports{seen: map[int64]map[string]time.Time{}}
	inf := externalversions.NewSharedInformerFactory(f.admin, 0).Plexus().V1alpha1().PlexusNodes().Informer()
	note := func(obj any) {
		n, ok := obj.(*plexusapi.PlexusNode)
		if !ok || n.Status.Policy == nil || n.Status.Policy.Source != "object" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		gen := n.Status.Policy.Generation
		if r.seen[gen] == nil {
			r.seen[gen] = map[string]time.Time{}
		}
		if _, ok := r.seen[gen][n.Name]; !ok {
			r.seen[gen][n.Name] = time.Now()
		}
		if raw, err := jsonSize(n); err == nil && raw > r.size {
			r.size = raw
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }}); err != nil {
		f.b.Fatal(err)
	}
	go inf.Run(ctx.Done())
	return r
}

func (r *reports) count(gen int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[gen])
}

func (r *reports) waitAll(b *testing.B, k int, gen int64, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for r.count(gen) < k {
		if time.Now().After(deadline) {
			b.Fatalf("after %s, %d of %d nodes report generation %d", bound, r.count(gen), k, gen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// quantiles are the times by which 50%, 99% and 100% of ts had happened,
// from start.
func quantiles(start time.Time, ts []time.Time) (p50, p99, p100 time.Duration) {
	ds := make([]time.Duration, 0, len(ts))
	for _, t := range ts {
		ds = append(ds, t.Sub(start))
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		i := int(q*float64(len(ds))+0.999999) - 1
		return ds[max(0, min(i, len(ds)-1))]
	}
	return at(0.5), at(0.99), ds[len(ds)-1]
}
