package kube

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// fakeAPI answers each request with the next of its scripted status codes
// (the last one repeats) and records what it got. Unit tests only: the
// real API behaviour is proven against kube-apiserver in tests/e2e.
type fakeAPI struct {
	mu       sync.Mutex
	codes    []int
	body     string
	requests []recorded
}

type recorded struct {
	method, path, contentType, body string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, recorded{r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(b)})
	code := f.codes[0]
	if len(f.codes) > 1 {
		f.codes = f.codes[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if code == http.StatusOK {
		_, _ = io.WriteString(w, f.body)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
		"reason": http.StatusText(code), "message": "scripted " + http.StatusText(code),
	})
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func newFake(t *testing.T, opts Options, body string, codes ...int) (*Source, *fakeAPI) {
	t.Helper()
	f := &fakeAPI{codes: codes, body: body}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := New(&rest.Config{Host: srv.URL}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

const podJSON = `{"metadata":{"namespace":"ns","name":"p","uid":"u1","annotations":{"k8s.v1.cni.cncf.io/networks":"a"}},"spec":{"nodeName":"n1","serviceAccountName":"sa"}}`

func TestConflictThenSuccessRetries(t *testing.T) {
	s, f := newFake(t, Options{Budget: 10 * time.Second}, podJSON, http.StatusConflict, http.StatusOK)
	pod, err := s.Pod(t.Context(), "ns", "p")
	if err != nil {
		t.Fatalf("Pod after 409 then 200: %v", err)
	}
	if pod.UID != "u1" || pod.NodeName != "n1" || pod.Annotations["k8s.v1.cni.cncf.io/networks"] != "a" {
		t.Errorf("pod decoded as %+v", pod)
	}
	if f.count() != 2 {
		t.Errorf("requests = %d, want 2 (one retry)", f.count())
	}
}

func TestServerErrorsUntilBudgetGivesUpNamingTheCall(t *testing.T) {
	s, f := newFake(t, Options{Budget: 700 * time.Millisecond, CallTimeout: time.Second}, "", http.StatusInternalServerError)
	_, err := s.NAD(t.Context(), "ns", "blue")
	if err == nil {
		t.Fatal("NAD with only 500s succeeded")
	}
	for _, want := range []string{"get NetworkAttachmentDefinition ns/blue", "gave up after", "within 700ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if f.count() < 2 {
		t.Errorf("requests = %d, want retries before giving up", f.count())
	}
}

func TestNotFoundIsFinal(t *testing.T) {
	s, f := newFake(t, Options{Budget: 10 * time.Second}, "", http.StatusNotFound)
	_, err := s.NAD(t.Context(), "ns", "blue")
	if !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("err = %v, want source.ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "NetworkAttachmentDefinition ns/blue") {
		t.Errorf("error %q does not name the NAD", err)
	}
	if f.count() != 1 {
		t.Errorf("requests = %d, want 1 (no retry)", f.count())
	}
}

func TestForbiddenIsFinalAndNamesTheCall(t *testing.T) {
	s, f := newFake(t, Options{Budget: 10 * time.Second}, "", http.StatusForbidden)
	_, err := s.Pod(t.Context(), "ns", "p")
	if err == nil || errors.Is(err, source.ErrNotFound) {
		t.Fatalf("err = %v, want a forbidden error", err)
	}
	if !strings.HasPrefix(err.Error(), "get pod ns/p: ") {
		t.Errorf("error %q does not start with the call", err)
	}
	if f.count() != 1 {
		t.Errorf("requests = %d, want 1 (no retry)", f.count())
	}
}

func TestPerRequestTimeoutIsRetriedWithinBudget(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; the client gives up first
	})
	srv := httptest.NewServer(slow)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	s, err := New(&rest.Config{Host: srv.URL}, Options{CallTimeout: 100 * time.Millisecond, Budget: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Pod(context.Background(), "ns", "p")
	if err == nil || !strings.Contains(err.Error(), "get pod ns/p: gave up after") {
		t.Fatalf("err = %v, want the call to give up after several attempts", err)
	}
	if strings.Contains(err.Error(), "after 1 attempts") {
		t.Errorf("err = %v: a timed-out request must be retried", err)
	}
}

// TestPublishStatusPatchesOnlyTheAnnotation: the merge patch of the pod's
// status subresource (never the pod itself, whose spec plexus must not be
// able to write) sets the one annotation and carries the pod's UID, which
// the API server refuses to change: a pod re-created under the same name
// is not patched.
func TestPublishStatusPatchesOnlyTheAnnotation(t *testing.T) {
	doc := []byte(`[{"name":"default","interface":"eth0","default":true}]`)
	for _, tc := range []struct {
		uid  string
		want string
	}{
		{uid: "u1", want: `{"metadata":{"annotations":{"` + status.Annotation + `":` + strconvQuote(doc) + `},"uid":"u1"}}`},
		{uid: "", want: `{"metadata":{"annotations":{"` + status.Annotation + `":` + strconvQuote(doc) + `}}}`},
	} {
		s, f := newFake(t, Options{}, `{}`, http.StatusOK)
		pod := &source.Pod{Namespace: "ns", Name: "p", UID: tc.uid}
		if err := s.PublishStatus(t.Context(), pod, doc); err != nil {
			t.Fatal(err)
		}
		if f.count() != 1 {
			t.Fatalf("requests = %d, want 1", f.count())
		}
		r := f.requests[0]
		if r.method != http.MethodPatch || r.path != "/api/v1/namespaces/ns/pods/p/status" || r.contentType != "application/merge-patch+json" {
			t.Errorf("request %s %s (%s), want a merge PATCH of the pod's status subresource", r.method, r.path, r.contentType)
		}
		var got, want any
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatalf("patch body %s: %v", r.body, err)
		}
		if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("patch body %s, want %s: only the %s annotation and the UID", r.body, tc.want, status.Annotation)
		}
	}
}

func strconvQuote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
}

func TestEventIsBestEffortAndNamesThePod(t *testing.T) {
	s, f := newFake(t, Options{Component: "plexus-test"}, `{}`, http.StatusOK)
	pod := &source.Pod{Namespace: "ns", Name: "p", UID: "u1", NodeName: "n1"}
	s.Event(t.Context(), pod, source.EventWarning, "NetworkNotFound", strings.Repeat("x", 2000))
	if f.count() != 1 {
		t.Fatalf("requests = %d, want 1", f.count())
	}
	r := f.requests[0]
	var ev corev1.Event
	if err := json.Unmarshal([]byte(r.body), &ev); err != nil {
		t.Fatal(err)
	}
	if r.method != http.MethodPost || r.path != "/api/v1/namespaces/ns/events" || ev.Type != "Warning" ||
		ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name != "p" || ev.InvolvedObject.UID != "u1" {
		t.Errorf("event request %s %s %+v", r.method, r.path, ev)
	}
	if ev.Kind != "Event" || ev.APIVersion != "v1" || ev.Source.Component != "plexus-test" || ev.Source.Host != "n1" ||
		ev.ReportingController != "plexus-test" || ev.ReportingInstance != "n1" || ev.Count != 1 ||
		ev.FirstTimestamp.IsZero() || !ev.LastTimestamp.Equal(&ev.FirstTimestamp) || ev.GenerateName != "p." {
		t.Errorf("event %+v", ev)
	}
	if len(ev.Message) > maxEventMessage {
		t.Errorf("event message of %d bytes, want at most %d", len(ev.Message), maxEventMessage)
	}
}

func TestUnauthorizedIsFinalAndSaysSo(t *testing.T) {
	s, f := newFake(t, Options{Budget: 10 * time.Second}, "", http.StatusUnauthorized)
	_, err := s.Pod(t.Context(), "ns", "p")
	if err == nil || !strings.Contains(err.Error(), "get pod ns/p: unauthorized") {
		t.Fatalf("err = %v, want it to name the call and say unauthorized", err)
	}
	if f.count() != 1 {
		t.Errorf("requests = %d, want 1 (no retry)", f.count())
	}
}

// The event's source host is the node plexus runs on when it knows it,
// the pod's node otherwise.
func TestEventNamesPlexussNode(t *testing.T) {
	for _, tc := range []struct {
		opt, podNode, want string
	}{
		{"node-a", "", "node-a"},   // a pod not read: no spec.nodeName
		{"node-a", "n1", "node-a"}, // plexus names its own node
		{"", "n1", "n1"},
	} {
		s, f := newFake(t, Options{Component: "plexus", NodeName: tc.opt}, `{}`, http.StatusOK)
		s.Event(t.Context(), &source.Pod{Namespace: "ns", Name: "p", NodeName: tc.podNode}, source.EventNormal, "AddedInterfaces", "m")
		var ev corev1.Event
		if err := json.Unmarshal([]byte(f.requests[0].body), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Source.Host != tc.want || ev.ReportingInstance != tc.want {
			t.Errorf("NodeName %q, pod's %q: host %q, instance %q; want %q", tc.opt, tc.podNode, ev.Source.Host, ev.ReportingInstance, tc.want)
		}
	}
}
