package plexusd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/record"
)

// gcFixture is a collector over a real record store, with a fake runtime
// (sandboxes) and a fake pipeline.Collect that removes the record when
// stale still holds, failing for the containers in fail.
type gcFixture struct {
	c        *collector
	store    *record.Store
	live     []string
	listErr  error
	fail     map[string]error
	detached []string
	passes   []string
	counted  int
	// beforeLock runs as the fake's lock is taken: an ADD that held it.
	beforeLock func(id string)
}

var gcNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func newGCFixture(t *testing.T) *gcFixture {
	t.Helper()
	f := &gcFixture{store: &record.Store{Dir: t.TempDir()}, fail: map[string]error{}}
	f.c = &collector{
		sandboxes: func(context.Context) ([]string, error) { return f.live, f.listErr },
		records:   f.store,
		collect: func(_ context.Context, id string, stale func() bool) (bool, error) {
			if f.beforeLock != nil {
				f.beforeLock(id)
			}
			if !stale() {
				return false, nil
			}
			if err := f.fail[id]; err != nil {
				return false, err
			}
			f.detached = append(f.detached, id)
			return true, f.store.Remove(id)
		},
		grace: 2 * time.Minute, every: time.Hour,
		now:       func() time.Time { return gcNow },
		collected: func() { f.counted++ },
		passed:    func(r string) { f.passes = append(f.passes, r) },
		log:       slog.New(slog.DiscardHandler),
	}
	return f
}

// record saves a record of container id for pod ns/name, last written age
// before now.
func (f *gcFixture) record(t *testing.T, id string, age time.Duration) {
	t.Helper()
	rec := &record.Record{ContainerID: id, Pod: &record.Pod{Namespace: "demo", Name: "pod-" + id, UID: "u-" + id}, Attachments: []record.Attachment{
		{Name: "default", Default: true, IfName: "eth0", Config: []byte(`{}`), State: record.Attached},
	}}
	if err := f.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	at := gcNow.Add(-age)
	if err := os.Chtimes(filepath.Join(f.store.Dir, id+".json"), at, at); err != nil {
		t.Fatal(err)
	}
}

func (f *gcFixture) left(t *testing.T) []string {
	t.Helper()
	ids, err := f.store.List()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

func TestGCCollectsStaleRecordsOnly(t *testing.T) {
	f := newGCFixture(t)
	f.record(t, "stale", time.Hour)
	f.record(t, "fresh", 30*time.Second)       // inside the grace: its ADD may not be listed yet
	f.record(t, "live", time.Hour)             // the runtime lists it
	f.record(t, "stopped", time.Hour)          // listed, not ready: its DEL is still to come
	f.live = []string{"live", "stopped", "xx"} // xx: a sandbox without a record
	if n := f.c.pass(context.Background()); n != 1 {
		t.Errorf("collected %d, want 1", n)
	}
	if !reflect.DeepEqual(f.detached, []string{"stale"}) {
		t.Errorf("detached %v, want [stale]", f.detached)
	}
	if want := []string{"fresh", "live", "stopped"}; !reflect.DeepEqual(f.left(t), want) {
		t.Errorf("records left %v, want %v", f.left(t), want)
	}
	if f.counted != 1 || !reflect.DeepEqual(f.passes, []string{passOK}) {
		t.Errorf("metrics: %d collected, passes %v", f.counted, f.passes)
	}
}

// An empty list from a runtime that answered is the node without pods:
// every old record goes.
func TestGCEmptyListFromAWorkingRuntimeCollectsAll(t *testing.T) {
	f := newGCFixture(t)
	f.record(t, "a", time.Hour)
	f.record(t, "b", time.Hour)
	if n := f.c.pass(context.Background()); n != 2 || len(f.left(t)) != 0 {
		t.Errorf("collected %d, left %v", n, f.left(t))
	}
}

// No answer is not "no sandboxes": nothing is collected, the pass counted
// as failed.
func TestGCListErrorCollectsNothing(t *testing.T) {
	f := newGCFixture(t)
	f.record(t, "a", time.Hour)
	f.listErr = errors.New("CRI ListPodSandbox: connection refused")
	f.live = []string{} // what a careless caller might take the failure for
	if n := f.c.pass(context.Background()); n != 0 || len(f.detached) != 0 {
		t.Fatalf("collected %d (%v) without the runtime's answer", n, f.detached)
	}
	if !reflect.DeepEqual(f.left(t), []string{"a"}) || !reflect.DeepEqual(f.passes, []string{passNoList}) || f.counted != 0 {
		t.Errorf("left %v, passes %v, counted %d", f.left(t), f.passes, f.counted)
	}
}

// One container failing to detach leaves its record for the next pass
// and does not stop the others.
func TestGCFailureOfOneContainerDoesNotStopTheOthers(t *testing.T) {
	f := newGCFixture(t)
	for _, id := range []string{"a", "b", "c"} {
		f.record(t, id, time.Hour)
	}
	f.fail["b"] = errors.New("delegate DEL: busy")
	if n := f.c.pass(context.Background()); n != 2 {
		t.Errorf("collected %d, want 2", n)
	}
	if !reflect.DeepEqual(f.detached, []string{"a", "c"}) || !reflect.DeepEqual(f.left(t), []string{"b"}) {
		t.Errorf("detached %v, left %v", f.detached, f.left(t))
	}
	if !reflect.DeepEqual(f.passes, []string{passPartial}) || f.counted != 2 {
		t.Errorf("passes %v, counted %d", f.passes, f.counted)
	}
	delete(f.fail, "b")
	if n := f.c.pass(context.Background()); n != 1 || len(f.left(t)) != 0 {
		t.Errorf("next pass: collected %d, left %v", n, f.left(t))
	}
}

// A record written while the collection waited for the container's lock
// (an ADD or a dynamic change held it) is fresh again once the lock is
// held: the container is left alone.
func TestGCDecidesAgainUnderTheLock(t *testing.T) {
	f := newGCFixture(t)
	f.record(t, "a", time.Hour)
	f.record(t, "b", time.Hour)
	f.beforeLock = func(id string) {
		if id == "a" {
			f.record(t, "a", time.Second)
		}
	}
	if n := f.c.pass(context.Background()); n != 1 || !reflect.DeepEqual(f.detached, []string{"b"}) {
		t.Errorf("collected %d: %v, want only b", n, f.detached)
	}
	if !reflect.DeepEqual(f.left(t), []string{"a"}) {
		t.Errorf("left %v, want [a]", f.left(t))
	}
}

// run makes a pass as soon as the caches are synced, before the first
// interval, and none when they never are.
func TestGCRunsOnceAfterSync(t *testing.T) {
	f := newGCFixture(t)
	f.record(t, "a", time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.c.run(ctx, func(context.Context) bool { return false })
	if len(f.passes) != 0 {
		t.Fatalf("a pass before the caches synced: %v", f.passes)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	counted := f.c.passed
	f.c.passed = func(r string) { counted(r); cancel() } // stop after the first pass
	f.c.run(ctx, func(context.Context) bool { return true })
	if !reflect.DeepEqual(f.passes, []string{passOK}) || len(f.left(t)) != 0 {
		t.Errorf("passes %v, left %v", f.passes, f.left(t))
	}
}

// recordFor saves a record of container id for the given pod, last
// written age before now.
func (f *gcFixture) recordFor(t *testing.T, id, pod, uid string, age time.Duration) {
	t.Helper()
	rec := &record.Record{ContainerID: id, Pod: &record.Pod{Namespace: "demo", Name: pod, UID: uid}, Attachments: []record.Attachment{
		{Name: "default", Default: true, IfName: "eth0", Config: []byte(`{}`), State: record.Attached},
	}}
	if err := f.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	at := gcNow.Add(-age)
	if err := os.Chtimes(filepath.Join(f.store.Dir, id+".json"), at, at); err != nil {
		t.Fatal(err)
	}
}

func TestGCKeepsTheOnlySandboxOfAPodTheAPIStillHas(t *testing.T) {
	f := newGCFixture(t)
	f.c.pods = repairPods{
		"demo/running":   {Namespace: "demo", Name: "running", UID: "u1"},
		"demo/replaced":  {Namespace: "demo", Name: "replaced", UID: "u2"},
		"demo/recreated": {Namespace: "demo", Name: "recreated", UID: "u3-new"},
	}
	// The runtime lists none of running's sandboxes (criSocket naming
	// another runtime looks like this): its record stays.
	f.recordFor(t, "running-old", "running", "u1", time.Hour)
	// kubelet gave replaced a new sandbox: the old one is collected.
	f.recordFor(t, "replaced-old", "replaced", "u2", time.Hour)
	f.recordFor(t, "replaced-new", "replaced", "u2", time.Hour)
	// The name is another pod's now, and a pod that is gone.
	f.recordFor(t, "recreated-old", "recreated", "u3-old", time.Hour)
	f.recordFor(t, "deleted-old", "deleted", "u4", time.Hour)
	f.live = []string{"replaced-new"}

	f.c.pass(context.Background())
	slices.Sort(f.detached)
	if want := []string{"deleted-old", "recreated-old", "replaced-old"}; !reflect.DeepEqual(f.detached, want) {
		t.Errorf("collected %v, want %v", f.detached, want)
	}
	if left := f.left(t); !reflect.DeepEqual(left, []string{"replaced-new", "running-old"}) {
		t.Errorf("records left %v", left)
	}
}
