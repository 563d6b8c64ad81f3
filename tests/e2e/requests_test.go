package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/tests/harness"
)

// background are what kube-apiserver's own controllers and aggregators
// request on their own schedule (leases, the OpenAPI documents); plexus
// asks for neither.
var background = map[string]bool{"leases": true, "openapi/v2": true, "openapi/v3": true}

// testRequestCounts measures, with kube-apiserver's own metrics, what one
// pod costs the API: 4 selections of 3 distinct NADs. Thin mode needs one
// pod GET, one GET per distinct NAD (never a LIST), one status PATCH and one
// event: 6 for ADD (the reference implementation makes 12), 0 for DEL.
func (s *suite) testRequestCounts(t *testing.T) {
	w, ns := s.world(t)
	for _, n := range []string{"a", "b", "c"} {
		s.nad(t, ns, n, w.BridgeNADConfig(n))
	}
	pod := s.pod(t, ns, "web", `[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"a"}]`)
	c := container(w, pod)
	before := harness.HostVeths(t)

	add := s.measure(t, "ADD", map[string]float64{
		"GET pods": 1, "GET network-attachment-definitions": 3, "PATCH pods status": 1, "POST events": 1,
	}, func() { w.Add(c) })
	if got := len(s.status(t, ns, "web")); got != 5 {
		t.Errorf("network-status has %d entries, want 5", got)
	}
	del := s.measure(t, "DEL", map[string]float64{}, func() { w.Del(c) })
	w.AssertNoLeaks(before)
	t.Logf("API requests per pod (4 selections, 3 distinct NADs): ADD %v [%s]; DEL %v [%s]", sum(add), formatCounts(add), sum(del), formatCounts(del))
}

// testRuntimeAnnotationsRequestCounts: with the pod-annotations capability
// declared, the runtime passes the pod's annotations (as kubelet gave them,
// with kubernetes.io/config.source) and K8S_POD_UID; thin mode without
// policy or extensions then reads no pod: 5 requests per ADD for the pod of
// testRequestCounts (3 NAD GETs, the status PATCH, the event), 0 per DEL.
// The PATCH requires the runtime's UID: a pod re-created under the same
// name is not touched by a late ADD for the old one.
func (s *suite) testRuntimeAnnotationsRequestCounts(t *testing.T) {
	w, ns := s.world(t)
	for _, n := range []string{"a", "b", "c"} {
		s.nad(t, ns, n, w.BridgeNADConfig(n))
	}
	pod := s.pod(t, ns, "web", `[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"a"}]`)
	w.Set("capabilities", map[string]any{pipeline.PodAnnotationsCapability: true})
	runtimeConfig := map[string]any{pipeline.PodAnnotationsCapability: kubeletAnnotations(pod)}
	c := container(w, pod)
	capArgs, err := json.Marshal(runtimeConfig)
	harness.Must(t, err)
	c.Env = append(c.Env, "CAP_ARGS="+string(capArgs))
	before := harness.HostVeths(t)

	add := s.measure(t, "ADD with the runtime's annotations", map[string]float64{
		"GET network-attachment-definitions": 3, "PATCH pods status": 1, "POST events": 1,
	}, func() { w.Add(c) })
	if got := len(s.status(t, ns, "web")); got != 5 {
		t.Errorf("network-status has %d entries, want 5", got)
	}
	if evs := s.events(t, pod); len(eventsWith(evs, "Normal", "AddedInterfaces")) != 1 {
		t.Errorf("want one AddedInterfaces event for the pod, got: %s", describeEvents(evs))
	}
	del := s.measure(t, "DEL", map[string]float64{}, func() { w.Del(c) })
	w.AssertNoLeaks(before)
	t.Logf("API requests per pod with the runtime's annotations (4 selections, 3 distinct NADs): ADD %v [%s]; DEL %v [%s]", sum(add), formatCounts(add), sum(del), formatCounts(del))

	if err := s.admin.CoreV1().Pods(ns).Delete(t.Context(), "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	s.pod(t, ns, "web", `[{"name":"a"}]`)
	stale := container(w, pod)
	_, e := w.PluginEdited(stale, "ADD", nil, map[string]any{"runtimeConfig": runtimeConfig})
	if e == nil || e.Code != 107 || !strings.Contains(e.Msg, string(pod.UID)) || !strings.Contains(e.Msg, "re-created") {
		t.Fatalf("late ADD for the deleted pod: %+v, want CNI error 107 naming its UID and a re-created pod", e)
	}
	w.AssertDetached(stale, before)
	if _, ok := s.getPod(t, ns, "web").Annotations[statusAnnotation]; ok {
		t.Error("the re-created pod got a network-status from the old pod's ADD")
	}
}

// kubeletAnnotations are the annotations kubelet puts in the sandbox config:
// the pod's, with the config source it adds to every pod.
func kubeletAnnotations(pod *corev1.Pod) map[string]string {
	out := map[string]string{"kubernetes.io/config.source": "api"}
	for k, v := range pod.Annotations {
		out[k] = v
	}
	return out
}

// testThickRequestCounts: plexusd serves reads from its informer caches,
// so once they are synced an ADD makes only the two writes (status PATCH,
// event) and DEL none; the same pod as testRequestCounts.
func (s *suite) testThickRequestCounts(t *testing.T) {
	w, ns := s.world(t)
	for _, n := range []string{"a", "b", "c"} {
		s.nad(t, ns, n, w.BridgeNADConfig(n))
	}
	pod := s.pod(t, ns, "web", `[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"a"}]`)
	c := container(w, pod)
	// StartDaemon waits for readiness, which is synced caches: their first
	// LIST holds the pod and NADs created above.
	d := w.StartDaemon("--node-name", "node-a")
	before := harness.HostVeths(t)
	add := s.measure(t, "thick ADD", map[string]float64{"PATCH pods status": 1, "POST events": 1}, func() { w.Add(c) })
	if got := len(s.status(t, ns, "web")); got != 5 {
		t.Errorf("network-status has %d entries, want 5", got)
	}
	del := s.measure(t, "thick DEL", map[string]float64{}, func() { w.Del(c) })
	w.AssertNoLeaks(before)
	if n := d.Metric("plexus_cache_misses_total"); n != 0 {
		t.Errorf("%v cache misses with synced caches", n)
	}
	t.Logf("thick mode API requests per pod: ADD %v [%s]; DEL %v [%s]", sum(add), formatCounts(add), sum(del), formatCounts(del))
}

// measure runs f and returns the API requests it caused, by "VERB
// resource". It fails t when they differ from want: anything beyond want is
// a request plexus should not make. The server counts a request as it
// completes, so it scrapes until want shows, then once more after a pause
// for any straggler.
func (s *suite) measure(t *testing.T, what string, want map[string]float64, f func()) map[string]float64 {
	t.Helper()
	ctx := t.Context()
	base := s.counts(t, ctx)
	f()
	// Bounds a wait for counts that should show at once; not a measurement.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got map[string]float64
	for {
		got = diff(base, s.counts(t, wctx))
		if covers(got, want) {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("%s: API requests %v never reached %v", what, got, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(500 * time.Millisecond)
	got = diff(base, s.counts(t, ctx))
	for k, n := range got {
		if n > want[k] {
			t.Errorf("%s made %v %s requests, at most %v allowed", what, n, k, want[k])
		}
	}
	if sum(got) > sum(want) {
		t.Errorf("%s made %v API requests, at most %v allowed: %v", what, sum(got), sum(want), got)
	}
	return got
}

func (s *suite) counts(t *testing.T, ctx context.Context) map[string]float64 {
	t.Helper()
	c, err := s.env.RequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// diff is after-before for resource requests, leaving out non-resource
// requests (the /metrics scrapes themselves) and background resources.
func diff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, n := range after {
		f := strings.Fields(k)
		if len(f) < 2 || background[f[1]] {
			continue
		}
		if d := n - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func covers(got, want map[string]float64) bool {
	for k, n := range want {
		if got[k] < n {
			return false
		}
	}
	return true
}

func sum(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}

// formatCounts is a stable rendering for logs.
func formatCounts(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// testStaticPod: kubelet runs a static pod under the UID it derived from
// the manifest and creates a mirror pod in the API, with its own UID and
// kubernetes.io/config.mirror set to the static pod's. The runtime's
// K8S_POD_UID is the static pod's: ADD accepts the mirror pod exactly when
// its annotation names that UID, also with the runtime's annotations
// (config.source "file": the mirror pod is read), and publishes the status
// on the mirror pod; any other UID is still refused (106).
func (s *suite) testStaticPod(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	const staticUID = "6f2b1c0e8d7a4c3b9a1e2f3d4c5b6a79"
	mirror := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-node-a", Namespace: ns, Annotations: map[string]string{
			networksAnnotation:            "blue",
			"kubernetes.io/config.mirror": staticUID,
			"kubernetes.io/config.hash":   staticUID,
			"kubernetes.io/config.source": "file",
		}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/pause"}}},
	}
	mirror, err := s.admin.CoreV1().Pods(ns).Create(t.Context(), mirror, metav1.CreateOptions{})
	harness.Must(t, err)
	if string(mirror.UID) == staticUID {
		t.Fatal("the mirror pod got the static pod's UID")
	}
	before := harness.HostVeths(t)

	other := w.Container(ns, "etcd-node-a")
	other.UID = "0123456789abcdef0123456789abcdef"
	_, e := w.Plugin(other, "ADD")
	if e == nil || e.Code != 106 || !strings.Contains(e.Msg, other.UID) || !strings.Contains(e.Msg, staticUID) {
		t.Fatalf("ADD for another static pod: %+v, want 106 naming both UIDs", e)
	}
	w.AssertDetached(other, before)

	runtimeAnnotations := map[string]any{pipeline.PodAnnotationsCapability: map[string]string{
		networksAnnotation: "blue", "kubernetes.io/config.hash": staticUID, "kubernetes.io/config.source": "file",
	}}
	for _, conf := range []map[string]any{nil, {"runtimeConfig": runtimeAnnotations}} {
		c := w.Container(ns, "etcd-node-a")
		c.UID = staticUID
		if _, e := w.PluginEdited(c, "ADD", nil, conf); e != nil {
			t.Fatalf("ADD for the static pod (config %v): %+v", conf, e)
		}
		if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0", "net1"}) {
			t.Errorf("interfaces %v, want eth0 and net1", got)
		}
		if st := s.status(t, ns, "etcd-node-a"); len(st) != 2 || st[1].Name != ns+"/blue" {
			t.Errorf("mirror pod's network-status %+v, want the default network and %s/blue", st, ns)
		}
		if _, e := w.PluginEdited(c, "DEL", nil, conf); e != nil {
			t.Fatalf("DEL: %+v", e)
		}
		w.AssertDetached(c, before)
	}
}
