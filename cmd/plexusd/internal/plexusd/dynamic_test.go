package plexusd

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/cri"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
	"github.com/plexus-cni/plexus/core/status"
)

type fakePods map[string]*source.Pod

func (f fakePods) CachedPod(ns, name string) *source.Pod { return f[ns+"/"+name] }
func (f fakePods) PodKeys() []string {
	var out []string
	for k := range f {
		out = append(out, k)
	}
	return out
}

type fakeConds struct {
	mu  sync.Mutex
	got []string
}

func (f *fakeConds) SetPodCondition(_ context.Context, pod *source.Pod, c kube.PodCondition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, pod.Name+" "+c.Status+" "+c.Reason)
	return nil
}

// dynFixture: pod demo/web (UID u1) attached as container c1 with the
// default network and demo/a on net1, its status published.
type dynFixture struct {
	r       *reconciler
	pods    fakePods
	conds   *fakeConds
	updates []string // "container netns"
	netnsErr,
	updateErr error
}

func newDynFixture(t *testing.T) *dynFixture {
	t.Helper()
	store := &record.Store{Dir: t.TempDir()}
	rec := &record.Record{ContainerID: "c1", Pod: &record.Pod{Namespace: "demo", Name: "web", UID: "u1"}, Attachments: []record.Attachment{
		{Name: "default", Default: true, IfName: "eth0", Config: []byte(`{}`), State: record.Attached},
		{Name: "demo/a", IfName: "net1", Config: []byte(`{}`), State: record.Attached},
	}}
	if err := store.Save(rec); err != nil {
		t.Fatal(err)
	}
	f := &dynFixture{pods: fakePods{"demo/web": {Namespace: "demo", Name: "web", UID: "u1", Annotations: map[string]string{
		selection.Annotation: "a",
		status.Annotation:    `[{"name":"default","interface":"eth0","default":true},{"name":"demo/a","interface":"net1","default":false}]`,
	}}}, conds: &fakeConds{}}
	f.r = newReconciler(f.pods, store, slog.New(slog.DiscardHandler))
	t.Cleanup(f.r.queue.ShutDown)
	f.r.conds = f.conds
	f.r.netns = func(_ context.Context, id, uid string) (string, error) {
		if uid != "u1" {
			t.Errorf("netns asked for pod UID %s", uid)
		}
		return "/proc/42/ns/net", f.netnsErr
	}
	f.r.update = func(_ context.Context, req *pipeline.Request, pod *source.Pod) (*pipeline.Change, error) {
		f.updates = append(f.updates, req.ContainerID+" "+req.NetNS)
		if f.updateErr != nil {
			return nil, f.updateErr
		}
		return &pipeline.Change{Attached: []string{"demo/b (net2)"}}, nil
	}
	return f
}

func (f *dynFixture) set(networks string) {
	f.pods["demo/web"].Annotations[selection.Annotation] = networks
}

func TestReconcile(t *testing.T) {
	denied := &types.Error{Code: codes.PolicyDenied, Msg: "denied"}
	failed := &types.Error{Code: codes.AttachFailed, Msg: "delegate failed"}
	tests := []struct {
		name      string
		networks  string
		netnsErr  error
		updateErr error
		retry     bool
		updates   []string
		conds     []string
	}{
		{"unchanged: nothing asked of the runtime", "a", nil, nil, false, nil, nil},
		{"added: updated in the runtime's netns", "a,b", nil, nil, false, []string{"c1 /proc/42/ns/net"}, []string{"web True Applied"}},
		{"sandbox not ready: left to its DEL", "a,b", cri.ErrNotReady, nil, false, nil, nil},
		{"runtime unreachable: retried", "a,b", errors.New("dial"), nil, true, nil, []string{"web False Failed"}},
		{"denied: not retried", "a,b", nil, denied, false, []string{"c1 /proc/42/ns/net"}, []string{"web False PolicyDenied"}},
		{"delegate failed: retried", "a,b", nil, failed, true, []string{"c1 /proc/42/ns/net"}, []string{"web False AttachFailed"}},
		{"ADD not done: nothing", "a,b", nil, pipeline.ErrNotSettled, false, []string{"c1 /proc/42/ns/net"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newDynFixture(t)
			f.set(tt.networks)
			f.netnsErr, f.updateErr = tt.netnsErr, tt.updateErr
			if retry := f.r.reconcile(context.Background(), "demo/web"); retry != tt.retry {
				t.Errorf("retry = %v, want %v", retry, tt.retry)
			}
			if !reflect.DeepEqual(f.updates, tt.updates) {
				t.Errorf("updates %v, want %v", f.updates, tt.updates)
			}
			if !reflect.DeepEqual(f.conds.got, tt.conds) {
				t.Errorf("conditions %v, want %v", f.conds.got, tt.conds)
			}
		})
	}
}

func TestReconcileRefusedAnnotationWaitsForAChange(t *testing.T) {
	f := newDynFixture(t)
	f.set("a,b")
	f.updateErr = &types.Error{Code: codes.PolicyDenied, Msg: "denied"}
	f.r.reconcile(context.Background(), "demo/web")
	f.r.reconcile(context.Background(), "demo/web")
	if len(f.updates) != 1 {
		t.Fatalf("the refused annotation was tried %d times, want 1", len(f.updates))
	}
	f.set("a,c")
	f.updateErr = nil
	f.r.reconcile(context.Background(), "demo/web")
	if len(f.updates) != 2 {
		t.Fatalf("a new annotation was not tried: %v", f.updates)
	}
}

func TestReconcileUnknownPodOrNoRecord(t *testing.T) {
	f := newDynFixture(t)
	f.pods["demo/other"] = &source.Pod{Namespace: "demo", Name: "other", UID: "u9", Annotations: map[string]string{selection.Annotation: "a"}}
	for _, key := range []string{"demo/gone", "demo/other"} {
		if f.r.reconcile(context.Background(), key) || len(f.updates) != 0 {
			t.Errorf("%s: updates %v", key, f.updates)
		}
	}
}

// The queue: at start every cached pod is looked at (changes made while
// plexusd was down), a failure is retried and a success forgotten.
func TestReconcilerRunReconcilesEveryPodAtStart(t *testing.T) {
	f := newDynFixture(t)
	f.set("a,b")
	done := make(chan struct{})
	f.r.update = func(_ context.Context, req *pipeline.Request, pod *source.Pod) (*pipeline.Change, error) {
		close(done)
		return &pipeline.Change{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		f.r.run(ctx, func(context.Context) bool { return true })
		close(stopped)
	}()
	<-done
	cancel()
	<-stopped
}

func TestPodKey(t *testing.T) {
	for args, want := range map[string]string{
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web;K8S_POD_UID=u": "demo/web",
		"K8S_POD_NAME=web": "",
		"":                 "",
	} {
		if got := podKey(args); got != want {
			t.Errorf("podKey(%q) = %q, want %q", args, got, want)
		}
	}
}

// A record written after the index was built (the pod's ADD) is found,
// and a static pod's mirror is looked up in the runtime by the static
// pod's UID.
func TestReconcileFindsLaterRecordsAndMirrorPods(t *testing.T) {
	f := newDynFixture(t)
	f.pods["demo/static-node1"] = &source.Pod{Namespace: "demo", Name: "static-node1", UID: "mirror-uid", Annotations: map[string]string{
		selection.Annotation: "a", pipeline.MirrorAnnotation: "static-uid",
	}}
	var asked []string
	f.r.netns = func(_ context.Context, id, uid string) (string, error) {
		asked = append(asked, id+" "+uid)
		return "/proc/9/ns/net", nil
	}
	if f.r.reconcile(context.Background(), "demo/static-node1") || len(f.updates) != 0 {
		t.Fatalf("a pod without a record was updated: %v", f.updates)
	}
	rec := &record.Record{ContainerID: "c2", Pod: &record.Pod{Namespace: "demo", Name: "static-node1", UID: "mirror-uid"}, Attachments: []record.Attachment{
		{Name: "default", Default: true, IfName: "eth0", Config: []byte(`{}`), State: record.Attached},
	}}
	if err := f.r.records.Save(rec); err != nil {
		t.Fatal(err)
	}
	f.r.reconcile(context.Background(), "demo/static-node1")
	if want := []string{"c2 static-uid"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("runtime asked for %v, want %v", asked, want)
	}
	if want := []string{"c2 /proc/9/ns/net"}; !reflect.DeepEqual(f.updates, want) {
		t.Errorf("updates %v, want %v", f.updates, want)
	}
}

// While the ADD's own status is still queued the pod looks stale: the
// reconciler waits for it instead of rewriting the status from the record.
func TestReconcileWaitsForThePodsQueuedStatus(t *testing.T) {
	f := newDynFixture(t)
	f.set("a,b")
	f.r.publishing = func(key string) bool { return key == "demo/web" }
	if retry := f.r.reconcile(context.Background(), "demo/web"); !retry || len(f.updates) != 0 {
		t.Errorf("retry %v, updates %v: want a retry and no update", retry, f.updates)
	}
	f.r.publishing = func(string) bool { return false }
	if f.r.reconcile(context.Background(), "demo/web"); len(f.updates) != 1 {
		t.Errorf("updates %v once the status was sent, want 1", f.updates)
	}
}
