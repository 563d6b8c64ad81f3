package plexusd

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/core/source"
)

// recordingSource records what reaches the API, in order; fail decides
// each status attempt's error, and gate, when set, holds every attempt
// until it is closed or the attempt's context ends.
type recordingSource struct {
	mu       sync.Mutex
	sent     []string // "status <doc>" or "event <reason>", as accepted
	attempts int
	fail     func(attempt int) error
	gate     chan struct{}
}

func (s *recordingSource) Pod(context.Context, string, string) (*source.Pod, error) {
	return nil, errors.New("not used")
}

func (s *recordingSource) NAD(context.Context, string, string) (*source.NAD, error) {
	return nil, errors.New("not used")
}

func (s *recordingSource) PublishStatus(ctx context.Context, _ *source.Pod, doc []byte) error {
	s.mu.Lock()
	s.attempts++
	n, gate := s.attempts, s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail != nil {
		if err := s.fail(n); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, "status "+string(doc))
	return nil
}

func (s *recordingSource) Event(_ context.Context, _ *source.Pod, _ source.EventType, reason, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, "event "+reason)
}

func (s *recordingSource) snapshot() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent), s.attempts
}

func newTestPublisher(t *testing.T, src *recordingSource) (*publisher, asyncSource) {
	t.Helper()
	p := newPublisher(src, slog.New(slog.DiscardHandler))
	p.retryMin, p.retryMax = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { p.close(time.Second) })
	return p, asyncSource{countingSource: countingSource{Source: src, m: newMetrics()}, pub: p}
}

// eventually waits (bounded; not a timing assertion) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// idle reports that the publisher has no work left.
func idle(p *publisher) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods) == 0
}

var (
	podA = &source.Pod{Namespace: "demo", Name: "a", UID: "u1"}
	podB = &source.Pod{Namespace: "demo", Name: "b", UID: "u2"}
)

func TestStatusIsRetriedUntilSentThenItsEventFollows(t *testing.T) {
	src := &recordingSource{fail: func(n int) error {
		if n < 3 {
			return errors.New("connection refused")
		}
		return nil
	}}
	p, as := newTestPublisher(t, src)
	ctx := withContainer(context.Background(), "c1")
	if err := as.PublishStatus(ctx, podA, []byte("s1")); err != nil {
		t.Fatal(err)
	}
	as.Event(ctx, podA, source.EventNormal, "AddedInterfaces", "attached")
	eventually(t, "the status and event sent", func() bool { return idle(p) })
	sent, attempts := src.snapshot()
	if want := []string{"status s1", "event AddedInterfaces"}; !slices.Equal(sent, want) || attempts != 3 {
		t.Fatalf("sent %v in %d attempts, want %v in 3", sent, attempts, want)
	}
}

func TestGoneOrRecreatedPodIsNotRetried(t *testing.T) {
	for name, err := range map[string]error{
		"not found": apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a"),
		"other uid": apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "a", nil),
	} {
		t.Run(name, func(t *testing.T) {
			src := &recordingSource{fail: func(int) error { return err }}
			p, as := newTestPublisher(t, src)
			_ = as.PublishStatus(context.Background(), podA, []byte("s1"))
			eventually(t, "the publisher gave up", func() bool { return idle(p) })
			if sent, attempts := src.snapshot(); len(sent) != 0 || attempts != 1 {
				t.Fatalf("sent %v in %d attempts, want nothing in 1", sent, attempts)
			}
		})
	}
}

// While one status is being sent, a newer status of the same pod replaces
// the older one still waiting; other pods are not held up.
func TestNewerStatusReplacesOneNotStarted(t *testing.T) {
	src := &recordingSource{gate: make(chan struct{})}
	p, as := newTestPublisher(t, src)
	ctx := context.Background()
	_ = as.PublishStatus(ctx, podA, []byte("s1"))
	eventually(t, "s1 started", func() bool { _, n := src.snapshot(); return n == 1 })
	_ = as.PublishStatus(ctx, podA, []byte("s2"))
	as.Event(ctx, podA, source.EventNormal, "E2", "")
	_ = as.PublishStatus(ctx, podA, []byte("s3"))
	close(src.gate)
	eventually(t, "everything sent", func() bool { return idle(p) })
	sent, _ := src.snapshot()
	if want := []string{"status s1", "status s3", "event E2"}; !slices.Equal(sent, want) {
		t.Fatalf("sent %v, want %v", sent, want)
	}
}

// A DEL cancels its container's queued and running work before it runs;
// another container's work goes on.
func TestDelCancelsItsContainersWork(t *testing.T) {
	src := &recordingSource{fail: func(int) error { return errors.New("API down") }}
	p, as := newTestPublisher(t, src)
	_ = as.PublishStatus(withContainer(context.Background(), "c1"), podA, []byte("a"))
	_ = as.PublishStatus(withContainer(context.Background(), "c2"), podB, []byte("b"))
	eventually(t, "both retrying", func() bool { _, n := src.snapshot(); return n >= 4 })
	var delSawContainer string
	h := p.handler(func(ctx context.Context, c *daemon.Call) *daemon.Reply {
		delSawContainer = containerOf(ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		if w := p.pods[podA.Ref()]; w != nil && (w.running != nil || len(w.queue) > 0) {
			t.Error("the DEL ran while its container's status was still pending")
		}
		return &daemon.Reply{}
	})
	h(context.Background(), &daemon.Call{Env: map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1"}})
	if delSawContainer != "c1" {
		t.Errorf("the DEL's context carries container %q, want c1", delSawContainer)
	}
	p.mu.Lock()
	_, bLeft := p.pods[podB.Ref()]
	p.mu.Unlock()
	if !bLeft {
		t.Error("the other container's status was dropped")
	}
	eventually(t, "pod a's worker ended", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, ok := p.pods[podA.Ref()]
		return !ok
	})
}

func TestCloseSendsWhatIsQueued(t *testing.T) {
	src := &recordingSource{}
	p := newPublisher(src, slog.New(slog.DiscardHandler))
	as := asyncSource{countingSource: countingSource{Source: src, m: newMetrics()}, pub: p}
	_ = as.PublishStatus(context.Background(), podA, []byte("s1"))
	as.Event(context.Background(), podB, source.EventWarning, "W", "")
	p.close(10 * time.Second)
	sent, _ := src.snapshot()
	slices.Sort(sent)
	if want := []string{"event W", "status s1"}; !slices.Equal(sent, want) {
		t.Fatalf("sent %v before close returned, want %v", sent, want)
	}
}

// A DEL drops its container's network-status, not its events: an event
// about a failed ADD is still true, and is sent.
func TestDelKeepsItsContainersEvents(t *testing.T) {
	src := &recordingSource{fail: func(int) error { return errors.New("API down") }}
	p, as := newTestPublisher(t, src)
	ctx := withContainer(context.Background(), "c1")
	_ = as.PublishStatus(ctx, podA, []byte("a"))
	as.Event(ctx, podA, source.EventWarning, "NetworkNotFound", "gone")
	eventually(t, "the status retrying", func() bool { _, n := src.snapshot(); return n >= 2 })
	h := p.handler(func(context.Context, *daemon.Call) *daemon.Reply { return &daemon.Reply{} })
	h(context.Background(), &daemon.Call{Env: map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1"}})
	eventually(t, "the event sent", func() bool {
		sent, _ := src.snapshot()
		return slices.Contains(sent, "event NetworkNotFound")
	})
	if sent, _ := src.snapshot(); slices.ContainsFunc(sent, func(s string) bool { return s == "status a" }) {
		t.Errorf("sent %v: the DEL's container's status went out", sent)
	}
}
