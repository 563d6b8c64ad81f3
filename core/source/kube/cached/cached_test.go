package cached

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
)

// api is the API server's side of a cache miss: scripted objects by path,
// 404 for the rest; it records the paths asked for. Unit tests only: the
// real informers run against kube-apiserver in tests/e2e.
type api struct {
	mu      sync.Mutex
	objects map[string]string
	asked   []string
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.asked = append(a.asked, r.URL.Path)
	body, ok := a.objects[r.URL.Path]
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`))
		return
	}
	_, _ = w.Write([]byte(body))
}

func (a *api) paths() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// world is a cached source over a fake dynamic client (the informers) and
// a scripted API (the misses).
type world struct {
	s      *Source
	dyn    *dynfake.FakeDynamicClient
	api    *api
	misses []string
	// watching receives a resource once its informer watches it: changes
	// made after that reach the cache.
	watching chan schema.GroupVersionResource
}

// newWorld starts the cache; hold, when set, keeps the pod list from
// answering until it is closed (a cache that has not synced yet).
func newWorld(t *testing.T, hold chan struct{}, objects ...*unstructured.Unstructured) *world {
	t.Helper()
	a := &api{objects: map[string]string{}}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	direct, err := kube.New(&rest.Config{Host: srv.URL}, kube.Options{Budget: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{podResource: "PodList", nadResource: "NetworkAttachmentDefinitionList"})
	for _, o := range objects {
		// By resource: the fake would guess "networkattachmentdefinitions".
		gvr := podResource
		if o.GetKind() != "Pod" {
			gvr = nadResource
		}
		if err := dyn.Tracker().Create(gvr, o, o.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	w := &world{dyn: dyn, api: a, watching: make(chan schema.GroupVersionResource, 4)}
	// The tracker's watch is registered before the informer hears of it,
	// so no change made afterwards is lost.
	dyn.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		wi, err := dyn.Tracker().Watch(action.GetResource(), action.GetNamespace())
		w.watching <- action.GetResource()
		return true, wi, err
	})
	if hold != nil {
		dyn.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			<-hold
			return false, nil, nil
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.s, err = start(ctx, direct, dyn, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	w.s.Misses = func(kind string) { w.misses = append(w.misses, kind) }
	return w
}

func (w *world) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !w.s.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	for range 2 {
		select {
		case <-w.watching:
		case <-ctx.Done():
			t.Fatal("informers did not watch")
		}
	}
}

func pod(name, uid string, annotations map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"namespace": "demo", "name": name, "uid": uid, "labels": map[string]any{"app": "web"},
			"annotations": annotations, "managedFields": []any{map[string]any{"manager": "kubectl"}},
		},
		"spec": map[string]any{
			"nodeName": "node-1", "serviceAccountName": "sa",
			"containers": []any{map[string]any{"name": "c", "image": "busybox"}},
		},
	}}
}

func nadObject(name, config string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"namespace": "demo", "name": name, "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"spec":     map[string]any{"config": config},
	}}
}

const (
	apiPod = `{"metadata":{"namespace":"demo","name":"%s","uid":"uid-api"},"spec":{"nodeName":"node-1"}}`
	apiNAD = `{"metadata":{"namespace":"demo","name":"late"},"spec":{"config":"{\"type\":\"macvlan\"}"}}`
)

func TestReads(t *testing.T) {
	nets := map[string]any{"k8s.v1.cni.cncf.io/networks": "net-a"}
	tests := []struct {
		name    string
		read    func(*Source) (any, error)
		api     map[string]string
		want    func(t *testing.T, got any)
		missing bool     // source.ErrNotFound
		misses  []string // reads that went to the API
	}{
		{
			name: "a cached pod, trimmed, without the API",
			read: func(s *Source) (any, error) { return s.Pod(context.Background(), "demo", "web") },
			want: func(t *testing.T, got any) {
				p := got.(*source.Pod)
				if p.Ref() != "demo/web" || p.UID != "uid-1" || p.Labels["app"] != "web" || p.Annotations["k8s.v1.cni.cncf.io/networks"] != "net-a" ||
					p.ServiceAccountName != "sa" || p.NodeName != "node-1" {
					t.Errorf("pod %+v", p)
				}
			},
		},
		{
			name:   "a pod not cached yet comes from the API",
			read:   func(s *Source) (any, error) { return s.Pod(context.Background(), "demo", "new") },
			api:    map[string]string{"/api/v1/namespaces/demo/pods/new": sprintf(apiPod, "new")},
			want:   func(t *testing.T, got any) { wantUID(t, got, "uid-api") },
			misses: []string{"pod"},
		},
		{
			name:   "a re-created pod: FreshPod reads the API's UID, not the cache's",
			read:   func(s *Source) (any, error) { return s.FreshPod(context.Background(), "demo", "web") },
			api:    map[string]string{"/api/v1/namespaces/demo/pods/web": sprintf(apiPod, "web")},
			want:   func(t *testing.T, got any) { wantUID(t, got, "uid-api") },
			misses: []string{"pod"},
		},
		{
			name:    "a pod nowhere",
			read:    func(s *Source) (any, error) { return s.Pod(context.Background(), "demo", "gone") },
			missing: true,
			misses:  []string{"pod"},
		},
		{
			name: "a cached NAD",
			read: func(s *Source) (any, error) { return s.NAD(context.Background(), "demo", "net-a") },
			want: func(t *testing.T, got any) {
				n := got.(*source.NAD)
				if n.Namespace != "demo" || n.Name != "net-a" || n.Spec.Config != `{"type":"bridge"}` || n.ManagedFields != nil {
					t.Errorf("NAD %+v", n)
				}
			},
		},
		{
			name: "a NAD not cached yet comes from the API",
			read: func(s *Source) (any, error) { return s.NAD(context.Background(), "demo", "late") },
			api:  map[string]string{"/apis/k8s.cni.cncf.io/v1/namespaces/demo/network-attachment-definitions/late": apiNAD},
			want: func(t *testing.T, got any) {
				if n := got.(*source.NAD); n.Spec.Config != `{"type":"macvlan"}` {
					t.Errorf("NAD %+v", n)
				}
			},
			misses: []string{"networkattachmentdefinition"},
		},
		{
			name:    "a NAD nowhere",
			read:    func(s *Source) (any, error) { return s.NAD(context.Background(), "other", "net-a") },
			missing: true,
			misses:  []string{"networkattachmentdefinition"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, nil, pod("web", "uid-1", nets), nadObject("net-a", `{"type":"bridge"}`))
			for path, body := range tt.api {
				w.api.objects[path] = body
			}
			w.sync(t)
			got, err := tt.read(w.s)
			switch {
			case tt.missing:
				if !errors.Is(err, source.ErrNotFound) {
					t.Errorf("err = %v, want not found", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				tt.want(t, got)
			}
			if !equal(w.misses, tt.misses) {
				t.Errorf("misses %v, want %v", w.misses, tt.misses)
			}
			if len(tt.misses) == 0 && len(w.api.paths()) != 0 {
				t.Errorf("a cached read asked the API for %v", w.api.paths())
			}
		})
	}
}

// TestNotSyncedReadsFromTheAPI: before the caches are filled, HasSynced
// says so, WaitForSync gives up with its context, and reads go to the API.
func TestNotSyncedReadsFromTheAPI(t *testing.T) {
	hold := make(chan struct{})
	w := newWorld(t, hold, pod("web", "uid-1", nil))
	defer close(hold)
	w.api.objects["/api/v1/namespaces/demo/pods/web"] = sprintf(apiPod, "web")
	if w.s.HasSynced() {
		t.Error("synced before the pod list answered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.s.WaitForSync(ctx) {
		t.Error("WaitForSync reported synced")
	}
	p, err := w.s.Pod(context.Background(), "demo", "web")
	if err != nil {
		t.Fatal(err)
	}
	wantUID(t, p, "uid-api")
	if !equal(w.misses, []string{"pod"}) {
		t.Errorf("misses %v", w.misses)
	}
}

// TestChangesReachTheCache: updates, re-creations and deletions of pods
// and NADs are what later reads see.
func TestChangesReachTheCache(t *testing.T) {
	w := newWorld(t, nil, pod("web", "uid-1", nil), nadObject("net-a", `{"type":"bridge"}`))
	w.sync(t)
	ctx := context.Background()
	pods, nads := w.dyn.Resource(podResource).Namespace("demo"), w.dyn.Resource(nadResource).Namespace("demo")
	_, err := pods.Update(ctx, pod("web", "uid-1", map[string]any{"k8s.v1.cni.cncf.io/networks": "net-b"}), metav1.UpdateOptions{})
	mustNil(t, err)
	_, err = nads.Update(ctx, nadObject("net-a", `{"type":"ipvlan"}`), metav1.UpdateOptions{})
	mustNil(t, err)
	_, err = pods.Create(ctx, pod("db", "uid-2", nil), metav1.CreateOptions{})
	mustNil(t, err)
	eventually(t, "the pod update", func() bool {
		p, err := w.s.Pod(ctx, "demo", "web")
		return err == nil && p.Annotations["k8s.v1.cni.cncf.io/networks"] == "net-b"
	})
	eventually(t, "the NAD update", func() bool {
		n, err := w.s.NAD(ctx, "demo", "net-a")
		return err == nil && n.Spec.Config == `{"type":"ipvlan"}`
	})
	eventually(t, "the new pod", func() bool {
		p, err := w.s.Pod(ctx, "demo", "db")
		return err == nil && p.UID == "uid-2"
	})
	mustNil(t, pods.Delete(ctx, "web", metav1.DeleteOptions{}))
	eventually(t, "the deletion", func() bool {
		_, err := w.s.Pod(ctx, "demo", "web")
		return errors.Is(err, source.ErrNotFound)
	})
}

// TestReadsAreCopies: a caller changing what it read does not change the
// cache.
func TestReadsAreCopies(t *testing.T) {
	w := newWorld(t, nil, nadObject("net-a", `{"type":"bridge"}`))
	w.sync(t)
	n, err := w.s.NAD(context.Background(), "demo", "net-a")
	mustNil(t, err)
	n.Spec.Config = "changed"
	n.Labels = map[string]string{"x": "y"}
	again, err := w.s.NAD(context.Background(), "demo", "net-a")
	mustNil(t, err)
	if again.Spec.Config != `{"type":"bridge"}` || again.Labels != nil {
		t.Errorf("the cache changed: %+v", again)
	}
}

func TestTransformsRefuseMalformedObjects(t *testing.T) {
	badPod := pod("web", "uid-1", nil)
	badPod.Object["spec"] = map[string]any{"nodeName": 7}
	badNAD := nadObject("net-a", "")
	badNAD.Object["spec"] = map[string]any{"config": []any{"not a string"}}
	for _, tt := range []struct {
		name string
		fn   func(any) (any, error)
		obj  any
		want string
	}{
		{"pod", trimPod, badPod, "pod demo/web"},
		{"NAD", toNAD, badNAD, "NetworkAttachmentDefinition demo/net-a"},
	} {
		if _, err := tt.fn(tt.obj); err == nil || !contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %q", tt.name, err, tt.want)
		}
		// A tombstone passes through as it is.
		tomb := cacheTombstone()
		if got, err := tt.fn(tomb); err != nil || got != tomb {
			t.Errorf("%s: tombstone became %v, %v", tt.name, got, err)
		}
	}
}
