package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

// sharedEngines builds each distinct policy once for every simulated
// node: a revision's files, with the library, are the same on each, so
// the digest of their contents identifies the work. It counts the builds
// and times the verifications.
type sharedEngines struct {
	mu sync.Mutex
	m  map[string]*sharedEngine
	// verifyTime is the last verification's duration.
	verifyTime time.Duration
	// started, when set, is told of each verification a node starts, by
	// the revision's directory.
	started func(dir string)
}

type sharedEngine struct {
	once   sync.Once
	eng    *policies.Engine
	passed int
	err    error
}

func (s *sharedEngines) entry(key string) *sharedEngine {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil {
		e = &sharedEngine{}
		s.m[key] = e
	}
	return e
}

func (s *sharedEngines) New(ctx context.Context, cfg policies.Config) (*policies.Engine, error) {
	e := s.entry("new\x00" + contentDigest(cfg.Paths))
	e.once.Do(func() { e.eng, e.err = policies.New(ctx, cfg) })
	return e.eng, e.err
}

func (s *sharedEngines) Verify(ctx context.Context, cfg policies.Config, dir string, tests bool, timeout time.Duration) (*policies.Engine, int, error) {
	if s.started != nil {
		s.started(dir)
	}
	key := "verify\x00" + contentDigest(append(append([]string(nil), cfg.Paths...), dir))
	if tests {
		key += "\x00tests"
	}
	e := s.entry(key)
	e.once.Do(func() {
		start := time.Now()
		e.eng, e.passed, e.err = revision.Verify(ctx, cfg, dir, tests, timeout)
		s.mu.Lock()
		s.verifyTime = time.Since(start)
		s.mu.Unlock()
	})
	return e.eng, e.passed, e.err
}

func (s *sharedEngines) lastVerify() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.verifyTime
}

// contentDigest hashes the names (relative to each path) and contents of
// the files under paths, so the same files in different directories hash
// alike.
func contentDigest(paths []string) string {
	h := sha256.New()
	for _, root := range paths {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			h.Write([]byte(rel + "\x00"))
			h.Write(b)
			return nil
		})
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// apiFigures are the API server's counters this benchmark compares.
type apiFigures struct {
	requests float64
	// policyEvents and policyBytes are the watch events the API server
	// sent for AttachmentPolicies, and their bytes.
	policyEvents, policyBytes float64
	nodeEvents                float64
	rss                       float64
	policySize                int
}

func (f *fleet) scrape(ctx context.Context) apiFigures {
	fams, err := f.env.Metrics(ctx)
	if err != nil {
		f.b.Fatal(err)
	}
	var a apiFigures
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		a.requests += m.GetCounter().GetValue()
	}
	for _, m := range fams["apiserver_watch_events_total"].GetMetric() {
		switch watchedKind(m) {
		case "attachmentpolic":
			a.policyEvents += m.GetCounter().GetValue()
		case "plexusnode":
			a.nodeEvents += m.GetCounter().GetValue()
		}
	}
	for _, m := range fams["apiserver_watch_events_sizes"].GetMetric() {
		if watchedKind(m) == "attachmentpolic" {
			a.policyBytes += m.GetHistogram().GetSampleSum()
		}
	}
	if g := fams["process_resident_memory_bytes"].GetMetric(); len(g) > 0 {
		a.rss = g[0].GetGauge().GetValue()
	}
	p, err := f.admin.PlexusV1alpha1().AttachmentPolicies().Get(ctx, "cluster", metav1.GetOptions{})
	if err == nil {
		a.policySize, _ = jsonSize(p)
	}
	return a
}

// watchedKind tells which of plexus's kinds a watch metric counts, by
// its kind or resource label, whichever the API server version has.
func watchedKind(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		v := strings.ToLower(l.GetValue())
		for _, k := range []string{"attachmentpolic", "plexusnode"} {
			if (l.GetName() == "kind" || l.GetName() == "resource") && strings.HasPrefix(v, k) {
				return k
			}
		}
	}
	return ""
}

func jsonSize(v any) (int, error) {
	b, err := json.Marshal(v)
	return len(b), err
}

// report puts the push's figures beside the benchmark's time.
func (f *fleet) report(b *testing.B, k int, pushed time.Time, r *reports, before, after apiFigures) {
	var got, act, rep []time.Time
	f.mu.Lock()
	for _, m := range f.received {
		if t, ok := m[2]; ok {
			got = append(got, t)
		}
	}
	for _, m := range f.activated {
		if t, ok := m[2]; ok {
			act = append(act, t)
		}
	}
	f.mu.Unlock()
	r.mu.Lock()
	for _, t := range r.seen[2] {
		rep = append(rep, t)
	}
	size := r.size
	r.mu.Unlock()
	if len(got) != k {
		b.Errorf("%d of %d nodes received generation 2", len(got), k)
		return
	}
	g50, g99, g100 := quantiles(pushed, got)
	a50, a99, a100 := quantiles(pushed, act)
	r50, r99, r100 := quantiles(pushed, rep)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(after.requests-before.requests, "requests/push")
	b.ReportMetric(after.policyEvents-before.policyEvents, "policy-watch-events/push")
	b.ReportMetric(after.policyBytes-before.policyBytes, "policy-watch-bytes/push")
	b.ReportMetric(after.nodeEvents-before.nodeEvents, "plexusnode-watch-events/push")
	b.ReportMetric(ms(g50), "received-p50-ms")
	b.ReportMetric(ms(g99), "received-p99-ms")
	b.ReportMetric(ms(g100), "received-p100-ms")
	b.ReportMetric(ms(a50), "activated-p50-ms")
	b.ReportMetric(ms(a99), "activated-p99-ms")
	b.ReportMetric(ms(a100), "activated-p100-ms")
	b.ReportMetric(ms(r50), "reported-p50-ms")
	b.ReportMetric(ms(r99), "reported-p99-ms")
	b.ReportMetric(ms(r100), "reported-p100-ms")
	b.ReportMetric(ms(f.engines.lastVerify()), "verify-ms")
	b.ReportMetric(float64(after.policySize), "policy-object-bytes")
	b.ReportMetric(float64(size), "plexusnode-bytes")
	b.ReportMetric(after.rss/(1<<20), "apiserver-rss-MiB")
	b.Logf("%d nodes: one push: %.0f requests, %.0f AttachmentPolicy watch events (%.0f bytes; object %d bytes), %.0f PlexusNode watch events; "+
		"received by 50/99/100%% of nodes in %s/%s/%s, activated in %s/%s/%s, reported in their PlexusNodes in %s/%s/%s; one verification %s (shared by content); apiserver RSS %.0f MiB",
		k, after.requests-before.requests, after.policyEvents-before.policyEvents, after.policyBytes-before.policyBytes, after.policySize,
		after.nodeEvents-before.nodeEvents, g50.Round(time.Millisecond), g99.Round(time.Millisecond), g100.Round(time.Millisecond),
		a50.Round(time.Millisecond), a99.Round(time.Millisecond), a100.Round(time.Millisecond), r50.Round(time.Millisecond), r99.Round(time.Millisecond), r100.Round(time.Millisecond), f.engines.lastVerify().Round(time.Millisecond), after.rss/(1<<20))
}
