package revision

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/policies"
)

// isolation enables namespace isolation: a pod may use NADs of its own
// namespace and "default" only.
const isolation = "plexus:\n  config:\n    namespace_isolation:\n      enabled: true\n"

// denyAll is a rule of the admin's own that denies everything, enabled.
const denyAll = `package plexus.rules.deny_all

deny contains {"code": "deny-all", "message": "nothing is allowed"} if true
`

const denyAllData = "plexus:\n  config:\n    deny_all:\n      enabled: true\n"

const passingTest = `package plexus.rules.deny_all_test

import data.plexus.rules.deny_all

test_denies if count(deny_all.deny) == 1
`

const failingTest = `package plexus.rules.deny_all_test

import data.plexus.rules.deny_all

test_allows if count(deny_all.deny) == 0
`

// slow takes seconds for every decision (nine million iterations).
const slow = `package plexus.rules.slow

deny contains {"code": "slow", "message": "slow"} if {
	some i in numbers.range(1, 3000)
	some j in numbers.range(1, 3000)
	i * j < 0
}
`

const slowData = "plexus:\n  config:\n    slow:\n      enabled: true\n"

func library(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "policies", "library"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// baseline writes a defaults file that denies nothing the sample asks.
func baselineFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "baseline.yaml")
	if err := os.WriteFile(p, []byte(isolation), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newSyncer(t testing.TB, stateDir string, deadline time.Duration) *Syncer {
	t.Helper()
	s, err := New(Options{Config: policies.Config{
		Paths:    []string{library(t)},
		Deadline: policies.Duration(deadline),
		Object:   &policies.ObjectConfig{Name: "cluster", StateDir: stateDir, DefaultPaths: []string{baselineFile(t)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func object(gen int64, onDelete string, modules, data map[string]string) *plexusapi.AttachmentPolicy {
	return &plexusapi.AttachmentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", Generation: gen},
		Spec:       plexusapi.AttachmentPolicySpec{Modules: modules, Data: data, OnDelete: onDelete},
	}
}

// allowed decides the sample attachment with what is in force.
func allowed(t *testing.T, r Result) bool {
	t.Helper()
	if r.Engine == nil {
		return true
	}
	d, err := r.Engine.Authorize(context.Background(), policies.SampleRequest())
	if err != nil {
		t.Fatal(err)
	}
	return d.Allowed
}

// activeTarget is where the active link points.
func activeTarget(t *testing.T, s *Syncer) string {
	t.Helper()
	target, err := os.Readlink(s.ActivePath())
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(target)
}

func TestApplyActivatesOnlyRevisionsThatPassEveryCheck(t *testing.T) {
	good := object(2, "", map[string]string{"deny_all.rego": denyAll, "deny_all_test.rego": passingTest}, map[string]string{"team.yaml": denyAllData})
	for _, tc := range []struct {
		name     string
		obj      *plexusapi.AttachmentPolicy
		deadline time.Duration
		wantErr  string // "" for a revision that becomes active
	}{
		{name: "good revision with passing tests", obj: good},
		{name: "compile error", obj: object(2, "", map[string]string{"bad.rego": "package x\n\nallow if {"}, nil), wantErr: "bad.rego"},
		{name: "failing test", obj: object(2, "", map[string]string{"deny_all.rego": denyAll, "deny_all_test.rego": failingTest}, map[string]string{"team.yaml": denyAllData}), wantErr: "tests failed"},
		{name: "too slow for the deadline", obj: object(2, "", map[string]string{"slow.rego": slow}, map[string]string{"slow.yaml": slowData}), deadline: 20 * time.Millisecond, wantErr: policies.CodeTimeout},
		{name: "file name outside the allow-list", obj: object(2, "", nil, map[string]string{"../x.yaml": isolation}), wantErr: `spec.data["../x.yaml"]: not an allowed file name`},
		{name: "module named as data", obj: object(2, "", map[string]string{"x.yaml": isolation}, nil), wantErr: "not an allowed file name"},
		{name: "oversize file", obj: object(2, "", nil, map[string]string{"big.yaml": "a: " + strings.Repeat("x", MaxFileBytes)}), wantErr: "more than"},
		{name: "empty spec", obj: object(2, "", nil, nil), wantErr: "no modules and no data"},
		{name: "unknown onDelete", obj: object(2, "Never", nil, map[string]string{"x.yaml": isolation}), wantErr: "spec.onDelete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newSyncer(t, dir, tc.deadline)
			start, err := s.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !allowed(t, start) || start.State.Source != SourceDefaults {
				t.Fatalf("before any revision: source %q, want the defaults allowing the sample", start.State.Source)
			}
			res, err := s.Apply(context.Background(), tc.obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply: error %v, want one containing %q", err, tc.wantErr)
				}
				if res.Changed || res.State.Source != SourceDefaults || !allowed(t, res) || activeTarget(t, s) != defaultsRev {
					t.Fatalf("a refused revision replaced the defaults: %+v, active %s", res.State, activeTarget(t, s))
				}
				if res.State.Error == "" || res.State.ObservedGeneration != 2 {
					t.Errorf("state does not record the refusal: %+v", res.State)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			files, _ := SpecFiles(tc.obj)
			want := Revision(2, files)
			if !res.Changed || res.State.Revision != want || activeTarget(t, s) != want || res.State.TestsPassed != 1 {
				t.Fatalf("state %+v, active %s; want revision %s active with 1 test passed", res.State, activeTarget(t, s), want)
			}
			if allowed(t, res) {
				t.Error("the activated revision (deny everything) allows the sample")
			}
		})
	}
}

// A revision refused after a good one leaves the good one deciding.
func TestRefusedRevisionKeepsThePreviousInForce(t *testing.T) {
	s := newSyncer(t, t.TempDir(), 0)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	good, err := s.Apply(context.Background(), object(1, "", map[string]string{"deny_all.rego": denyAll}, map[string]string{"d.yaml": denyAllData}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(context.Background(), object(2, "", map[string]string{"deny_all.rego": "package plexus.rules.deny_all\n\ndeny contains x if {"}, nil))
	if err == nil {
		t.Fatal("a revision that does not compile was accepted")
	}
	if res.Engine != good.Engine || res.State.Revision != good.State.Revision || allowed(t, res) {
		t.Fatalf("state %+v after a refusal, want revision %s in force", res.State, good.State.Revision)
	}
	if res.State.ObservedGeneration != 2 || !strings.Contains(res.State.Error, "revision 2-") {
		t.Errorf("state %+v: want generation 2 observed with its error", res.State)
	}
}

// A refused revision changes nothing in force, its onDelete included: an
// object whose refused generation says AllowAll, then deleted, leaves the
// revision in force (which said Keep) in force, on every node.
func TestRefusedRevisionDoesNotChangeOnDelete(t *testing.T) {
	s := newSyncer(t, t.TempDir(), 0)
	ctx := context.Background()
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	good, err := s.Apply(ctx, object(1, plexusapi.OnDeleteKeep, map[string]string{"deny_all.rego": denyAll}, map[string]string{"d.yaml": denyAllData}))
	if err != nil {
		t.Fatal(err)
	}
	refused := object(2, plexusapi.OnDeleteAllowAll, map[string]string{"deny_all.rego": denyAll, "deny_all_test.rego": failingTest}, map[string]string{"d.yaml": denyAllData})
	res, err := s.Apply(ctx, refused)
	if err == nil {
		t.Fatal("a revision failing its own tests was accepted")
	}
	if res.State.OnDelete != plexusapi.OnDeleteKeep {
		t.Errorf("onDelete %q after a refused generation, want the one in force (Keep)", res.State.OnDelete)
	}
	res, err = s.Delete(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Source != SourceObject || res.State.Revision != good.State.Revision || allowed(t, res) {
		t.Errorf("after deletion: %+v, want revision %s (deny all) still in force", res.State, good.State.Revision)
	}
}

// A refusal is remembered for the object and spec it was about: the same
// ones are not checked again, but a re-created object (new UID) at the
// same generation is.
func TestRefusalIsKeyedByObjectAndSpec(t *testing.T) {
	s := newSyncer(t, t.TempDir(), 0)
	ctx := context.Background()
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	bad := object(1, "", map[string]string{"deny_all.rego": "package plexus.rules.deny_all\n\ndeny contains x if {"}, nil)
	bad.UID = "uid-1"
	if res, err := s.Apply(ctx, bad); err == nil || !res.Attempted {
		t.Fatalf("first refusal: attempted %v, err %v", res.Attempted, err)
	}
	if res, err := s.Apply(ctx, bad); err == nil || res.Attempted {
		t.Errorf("the same object and spec again: attempted %v, err %v; want the remembered refusal", res.Attempted, err)
	}
	good := object(1, "", map[string]string{"deny_all.rego": denyAll}, map[string]string{"d.yaml": denyAllData})
	good.UID = "uid-2"
	res, err := s.Apply(ctx, good)
	if err != nil || !res.Changed || res.State.Error != "" || allowed(t, res) {
		t.Errorf("a re-created valid object at generation 1: changed %v, state %+v, err %v; want it checked and in force", res.Changed, res.State, err)
	}
}

func TestDeleteFollowsTheLastOnDelete(t *testing.T) {
	for _, tc := range []struct {
		onDelete    string
		wantSource  string
		wantAllowed bool
	}{
		{"", SourceObject, false},
		{plexusapi.OnDeleteKeep, SourceObject, false},
		{plexusapi.OnDeleteAllowAll, SourceNone, true},
	} {
		t.Run("onDelete="+tc.onDelete, func(t *testing.T) {
			dir := t.TempDir()
			s := newSyncer(t, dir, 0)
			if _, err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Apply(context.Background(), object(1, tc.onDelete, map[string]string{"deny_all.rego": denyAll}, map[string]string{"d.yaml": denyAllData})); err != nil {
				t.Fatal(err)
			}
			res, err := s.Delete(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.State.Source != tc.wantSource || allowed(t, res) != tc.wantAllowed {
				t.Fatalf("after deletion: source %q, allowed %v; want %q, %v", res.State.Source, allowed(t, res), tc.wantSource, tc.wantAllowed)
			}
			// What the thin plugin loads (library + active) agrees.
			eng, err := policies.New(context.Background(), policies.Config{Paths: []string{library(t), s.ActivePath()}})
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := eng.Authorize(context.Background(), policies.SampleRequest()); d.Allowed != tc.wantAllowed {
				t.Errorf("library + active link decides allowed=%v, want %v", d.Allowed, tc.wantAllowed)
			}
		})
	}
}

// A restarted node enforces what it enforced, before it sees the API, and
// handles a deletion it sees only then as the persisted onDelete says.
func TestRestartUsesPersistedState(t *testing.T) {
	dir := t.TempDir()
	s := newSyncer(t, dir, 0)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	applied, err := s.Apply(context.Background(), object(3, plexusapi.OnDeleteAllowAll, map[string]string{"deny_all.rego": denyAll}, map[string]string{"d.yaml": denyAllData}))
	if err != nil {
		t.Fatal(err)
	}

	again := newSyncer(t, dir, 0)
	res, err := again.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Source != SourceObject || res.State.Revision != applied.State.Revision || allowed(t, res) {
		t.Fatalf("after restart: %+v, want revision %s in force", res.State, applied.State.Revision)
	}
	// The informer then finds the object gone.
	res, err = again.Delete(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Source != SourceNone || !allowed(t, res) {
		t.Fatalf("deletion after restart: %+v, want none (AllowAll)", res.State)
	}
	third := newSyncer(t, dir, 0)
	if res, err = third.Start(context.Background()); err != nil || res.State.Source != SourceNone {
		t.Fatalf("after a second restart: %+v, %v; want none", res.State, err)
	}
}

// A state file naming a directory outside the revisions is not followed.
func TestStateFileIsCheckedBeforeUse(t *testing.T) {
	dir := t.TempDir()
	state := `{"source":"object","object":"cluster","revision":"../../etc","onDelete":"Keep"}`
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := newSyncer(t, dir, 0).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Source != SourceDefaults {
		t.Fatalf("source %q, want the defaults", res.State.Source)
	}
}

// Old revisions are removed, keeping a bounded number.
func TestOldRevisionsArePruned(t *testing.T) {
	dir := t.TempDir()
	s := newSyncer(t, dir, 0)
	if _, err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for gen := int64(1); gen <= 8; gen++ {
		data := map[string]string{"d.yaml": isolation + "# " + strings.Repeat("x", int(gen)) + "\n"}
		if _, err := s.Apply(context.Background(), object(gen, "", nil, data)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, revisionsDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != s.o.Keep+1 {
		t.Errorf("%d revisions on disk, want %d", len(entries), s.o.Keep+1)
	}
}

var _ pipeline.Authorizer = (*policies.Engine)(nil)
