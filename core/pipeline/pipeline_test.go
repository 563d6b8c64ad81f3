package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/devinfo"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

func cniErr(t *testing.T, err error) *types.Error {
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) {
		t.Fatalf("want a CNI error, got %v", err)
	}
	return te
}

func TestAssignInterfacesS4_1_2_1_5(t *testing.T) {
	el := func(iface string) *selection.Element {
		return &selection.Element{Name: "n", Namespace: "ns", Interface: iface}
	}
	tests := []struct {
		name    string
		els     []*selection.Element
		want    []string
		wantErr string
	}{
		{"generated", []*selection.Element{el(""), el(""), el("")}, []string{"net1", "net2", "net3"}, ""},
		{"skip requested", []*selection.Element{el(""), el("net1"), el(""), el("net3")}, []string{"net2", "net1", "net4", "net3"}, ""},
		{"custom names", []*selection.Element{el("data0"), el("")}, []string{"data0", "net1"}, ""},
		{"duplicate requested", []*selection.Element{el("data0"), el("data0")}, nil, `already used by selection element 0`},
		{"default's name", []*selection.Element{el("eth0")}, nil, `already used by the default network`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AssignInterfaces(map[string]string{"eth0": "the default network"}, tt.els)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestAddS6_2DefaultFirstThenSelectionsInOrder(t *testing.T) {
	f := newFixture(t, "net-b,net-a,net-b")
	res, err := f.p.Add(context.Background(), f.req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ADD default-net eth0", "ADD net-b net1", "ADD net-a net2", "ADD net-b net3"}
	if !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	if res.Version() != "1.0.0" {
		t.Errorf("result version %s", res.Version())
	}
	if f.src.nadReads != 2 {
		t.Errorf("%d NAD reads for 2 distinct NADs", f.src.nadReads)
	}
	var st []status.Entry
	if err := json.Unmarshal(f.src.status, &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 4 || !st[0].Default || st[1].Name != "demo/net-b" || st[3].Interface != "net3" {
		t.Errorf("status %+v", st)
	}
	if len(f.src.events) != 1 || !strings.HasPrefix(f.src.events[0], "Normal AddedInterfaces: attached eth0 from default-net") {
		t.Errorf("events %q", f.src.events)
	}
}

func TestAddPassesKubeletArgsAndCapabilities(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a","ips":["10.0.0.2"],"mac":"02:00:00:00:00:01"}]`)
	f.req.RuntimeConfig = map[string]any{"portMappings": []any{map[string]any{"hostPort": 80}}}
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	def := f.cni.lastRT["default-net"]
	if def.CapabilityArgs["portMappings"] == nil || def.Args[0] != [2]string{"IgnoreUnknown", "1"} {
		t.Errorf("default network runtime conf %+v", def)
	}
	sec := f.cni.lastRT["net-a"]
	if sec.CapabilityArgs["portMappings"] != nil {
		t.Error("kubelet's port mappings must only reach the default network")
	}
	if !reflect.DeepEqual(sec.CapabilityArgs["ips"], []string{"10.0.0.2"}) || sec.CapabilityArgs["mac"] != "02:00:00:00:00:01" {
		t.Errorf("s4.1.2.1.3.2 capability args %+v", sec.CapabilityArgs)
	}
	if !strings.Contains(string(f.cni.lastConf["net-a"]), `"args":{"cni":{"ips":["10.0.0.2"],"mac":"02:00:00:00:00:01"}}`) {
		t.Errorf("args.cni not injected: %s", f.cni.lastConf["net-a"])
	}
}

func TestAddS7_2FailureStopsAndUndoesInReverse(t *testing.T) {
	f := newFixture(t, "net-a,net-b,net-c")
	f.cni.fail["ADD net-b"] = errors.New("boom")
	_, err := f.p.Add(context.Background(), f.req)
	te := cniErr(t, err)
	if te.Code != codes.AttachFailed || !strings.Contains(te.Msg, "demo/net-b (net2)") || !strings.Contains(te.Msg, "boom") || !strings.Contains(te.Msg, "pod demo/web") {
		t.Errorf("error %+v", te)
	}
	want := []string{"ADD default-net eth0", "ADD net-a net1", "ADD net-b net2", "DEL net-b net2", "DEL net-a net1", "DEL default-net eth0"}
	if !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	if rec, _ := f.p.Records.Load("c1"); rec != nil {
		t.Error("a failed ADD left a record")
	}
	if f.src.status != nil {
		t.Error("a failed ADD published status")
	}
}

func TestAddS4_1_2_1_3VerifiesRequestedIPs(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a","ips":["10.9.9.9"]}]`)
	_, err := f.p.Add(context.Background(), f.req)
	te := cniErr(t, err)
	if te.Code != codes.NotHonored || !strings.Contains(te.Msg, "10.9.9.9") || !strings.Contains(te.Msg, "10.0.0.2") {
		t.Errorf("error %+v", te)
	}
	// Honoured when the result carries the address.
	f = newFixture(t, `[{"name":"net-a","ips":["10.9.9.9/24"]}]`)
	f.cni.ips["net-a"] = "10.9.9.9/24"
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
}

func TestAddVerifyWithoutResultFails(t *testing.T) {
	f := newFixture(t, `[{"name":"net-a","mac":"02:aa:00:00:00:01"}]`)
	f.cni.noResult["net-a"] = true
	_, err := f.p.Add(context.Background(), f.req)
	if te := cniErr(t, err); te.Code != codes.NotHonored || !strings.Contains(te.Msg, "no result") {
		t.Errorf("error %+v", te)
	}
}

func TestAddMinimalStatusWithoutResult(t *testing.T) {
	f := newFixture(t, "net-a")
	f.cni.noResult["net-a"] = true
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(f.src.status), `"name": "demo/net-a",
        "interface": "net1",
        "default": false`) {
		t.Errorf("minimal entry missing: %s", f.src.status)
	}
}

// TestAddPodUIDMatchesRuntimeOrItsStaticPod: the pod read by name must be
// the runtime's (K8S_POD_UID), or the mirror pod kubelet created for that
// static pod; every other UID is a pod re-created under the same name.
func TestAddPodUIDMatchesRuntimeOrItsStaticPod(t *testing.T) {
	for _, tc := range []struct {
		name       string
		runtimeUID string
		mirror     *string // the API pod's kubernetes.io/config.mirror; nil: absent
		ok         bool
	}{
		{name: "matching UID", runtimeUID: "u1", ok: true},
		{name: "no UID from the runtime", runtimeUID: "", ok: true},
		{name: "mirror annotation names the runtime's static pod", runtimeUID: "static-hash", mirror: ptr("static-hash"), ok: true},
		{name: "mirror annotation names another static pod", runtimeUID: "static-hash", mirror: ptr("other-hash")},
		{name: "empty mirror annotation", runtimeUID: "static-hash", mirror: ptr("")},
		{name: "annotation absent", runtimeUID: "other-uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "net-a")
			f.req.Args[2][1] = tc.runtimeUID
			if tc.mirror != nil {
				f.src.pods["demo/web"].Annotations[MirrorAnnotation] = *tc.mirror
			}
			_, err := f.p.Add(context.Background(), f.req)
			if tc.ok {
				if err != nil {
					t.Fatalf("ADD refused: %v", err)
				}
				if want := []string{"ADD default-net eth0", "ADD net-a net1"}; !reflect.DeepEqual(f.cni.calls, want) {
					t.Errorf("calls %v, want %v", f.cni.calls, want)
				}
				return
			}
			if te := cniErr(t, err); te.Code != codes.PodLookup || !strings.Contains(te.Msg, tc.runtimeUID) || !strings.Contains(te.Msg, "u1") {
				t.Errorf("error %+v, want code %d naming both UIDs", te, codes.PodLookup)
			}
			if len(f.cni.calls) != 0 {
				t.Errorf("delegates ran: %v", f.cni.calls)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestAddWithoutPodArgsAttachesDefaultOnly(t *testing.T) {
	f := newFixture(t, "net-a")
	f.req.Args = nil
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.cni.calls, []string{"ADD default-net eth0"}) || f.src.status != nil {
		t.Errorf("calls %v status %s", f.cni.calls, f.src.status)
	}
}

func TestResultConvertedToRuntimeVersion(t *testing.T) {
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		f := newFixture(t, "")
		f.req.CNIVersion = v
		res, err := f.p.Add(context.Background(), f.req)
		if err != nil {
			t.Fatal(v, err)
		}
		if res.Version() != v {
			t.Errorf("runtime %s got a %s result", v, res.Version())
		}
	}
}

func TestDelS7_2ReverseContinuesPastFailuresAndNamesThem(t *testing.T) {
	f := newFixture(t, "net-a,net-b,net-c")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.calls = nil
	f.cni.fail["DEL net-b"] = errors.New("stuck")
	f.cni.fail["DEL net-a"] = errors.New("also stuck")
	err := f.p.Del(context.Background(), f.req)
	te := cniErr(t, err)
	if te.Code != codes.DetachFailed || !strings.Contains(te.Msg, "demo/net-b (net2): stuck") || !strings.Contains(te.Msg, "demo/net-a (net1): also stuck") {
		t.Errorf("error %+v", te)
	}
	want := []string{"DEL net-c net3", "DEL net-b net2", "DEL net-a net1", "DEL default-net eth0"}
	if !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	// The next DEL retries only what failed, then forgets the container.
	f.cni.calls = nil
	delete(f.cni.fail, "DEL net-b")
	delete(f.cni.fail, "DEL net-a")
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL net-b net2", "DEL net-a net1"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("retry calls %v, want %v", f.cni.calls, want)
	}
	if rec, _ := f.p.Records.Load("c1"); rec != nil {
		t.Error("record kept after a successful DEL")
	}
}

func TestDelNeedsNoSource(t *testing.T) {
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.p.Source = nil
	f.cni.calls = nil
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if len(f.cni.calls) != 2 {
		t.Errorf("calls %v", f.cni.calls)
	}
}

// After the record's attachments, DEL undoes what libcni still caches for
// the container (a record that lost updates), but never plexus's own entry,
// which only a cacheDir shared with the runtime's cache would put there.
func TestDelUndoesCachedLeftoversButNotPlexusItself(t *testing.T) {
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.cached = []*libcni.NetworkAttachment{
		{ContainerID: "c1", Network: "lost", IfName: "net9", Config: []byte(`{"cniVersion":"1.0.0","name":"lost","type":"bridge"}`)},
		{ContainerID: "c1", Network: "plexus", IfName: "eth0", Config: []byte(`{"cniVersion":"1.0.0","name":"plexus","plugins":[{"type":"plexus-shim"}]}`)},
	}
	f.cni.calls = nil
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(f.cni.calls, "|")
	if got != "DEL net-a net1|DEL default-net eth0|DEL lost net9" {
		t.Errorf("DEL calls %q", got)
	}
}

func TestGCPassesPerNetworkValidAttachments(t *testing.T) {
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.calls = nil
	if err := f.p.GC(context.Background(), []types.GCAttachment{{ContainerID: "c1", IfName: "eth0"}}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(f.cni.calls, "|")
	if !strings.Contains(got, "GC net-a [{c1 net1}]") || !strings.Contains(got, "GC default-net [{c1 eth0}]") {
		t.Errorf("GC calls %v", f.cni.calls)
	}
	// A container the runtime no longer knows is detached from its record.
	f.cni.calls = nil
	if err := f.p.GC(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.cni.calls, "|"); !strings.Contains(got, "DEL net-a net1|DEL default-net eth0") || !strings.Contains(got, "GC default-net []") {
		t.Errorf("GC calls %v", f.cni.calls)
	}
}

// Collect detaches a stale container from its record under its lock, but
// leaves it alone when stale, asked with the lock held, says no.
func TestCollectDecidesUnderTheContainerLock(t *testing.T) {
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.calls = nil
	held := false
	probe := func(id string, answer bool) func() bool {
		return func() bool {
			// The lock is ours: another taker must not get it now.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			unlock, err := f.p.Locks.Lock(ctx, id)
			if held = err != nil; !held {
				unlock(false)
			}
			return answer
		}
	}
	if done, err := f.p.Collect(context.Background(), "c1", probe("c1", false)); done || err != nil || !held {
		t.Fatalf("not stale: done %v err %v, lock held while asked %v", done, err, held)
	}
	if len(f.cni.calls) != 0 {
		t.Fatalf("a container not stale was detached: %v", f.cni.calls)
	}
	if rec, _ := f.p.Records.Load("c1"); rec == nil {
		t.Fatal("the record of a container not stale is gone")
	}
	// A DEL that held the lock meanwhile removed record and lock file:
	// no lock file of the collection's is left either.
	if done, err := f.p.Collect(context.Background(), "gone", probe("gone", false)); done || err != nil || !held {
		t.Fatalf("no record: done %v err %v, lock held while asked %v", done, err, held)
	}
	if _, err := os.Stat(filepath.Join(f.p.Locks.Dir, "gone.lock")); !os.IsNotExist(err) {
		t.Errorf("lock file of a container without a record left: %v", err)
	}
	done, err := f.p.Collect(context.Background(), "c1", probe("c1", true))
	if !done || err != nil || !held {
		t.Fatalf("stale: done %v err %v, lock held while asked %v", done, err, held)
	}
	if got := strings.Join(f.cni.calls, "|"); got != "DEL net-a net1|DEL default-net eth0" {
		t.Errorf("DEL calls %q", got)
	}
	if rec, _ := f.p.Records.Load("c1"); rec != nil {
		t.Error("the record outlived the collection")
	}
	if left, _ := os.ReadDir(f.p.Locks.Dir); len(left) != 0 {
		t.Errorf("lock files left: %v", left)
	}
	// A delegate failing keeps the record for the next pass.
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.fail["DEL net-a"] = errors.New("busy")
	if done, err := f.p.Collect(context.Background(), "c1", probe("c1", true)); done || err == nil {
		t.Fatalf("failing delegate: done %v err %v", done, err)
	}
	if rec, _ := f.p.Records.Load("c1"); rec == nil || len(rec.Attachments) != 1 {
		t.Errorf("record after a failed collection: %+v", rec)
	}
}

func TestCheckRunsEveryAttachment(t *testing.T) {
	f := newFixture(t, "net-a,net-b")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.calls = nil
	if err := f.p.Check(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"CHECK default-net eth0", "CHECK net-a net1", "CHECK net-b net2"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v", f.cni.calls)
	}
	f.cni.fail["CHECK net-b"] = errors.New("gone")
	if te := cniErr(t, f.p.Check(context.Background(), f.req)); te.Code != codes.CheckFailed || !strings.Contains(te.Msg, "demo/net-b (net2)") {
		t.Errorf("error %+v", te)
	}
}

type fakeAuthorizer struct {
	deny      map[string]Decision
	needsNS   bool
	err       error
	sawLabels map[string]string
}

func (a *fakeAuthorizer) Authorize(_ context.Context, req *AuthorizeRequest) (Decision, error) {
	a.sawLabels = req.NamespaceLabels
	if d, ok := a.deny[req.Attachment.Name]; ok {
		return d, a.err
	}
	return Decision{Allowed: true}, a.err
}

func (a *fakeAuthorizer) NeedsNamespaceLabels() bool { return a.needsNS }

func TestS7_4DenialBeforeAnyDelegate(t *testing.T) {
	f := newFixture(t, "net-a,net-b")
	f.p.Stages.Authorizer = &fakeAuthorizer{deny: map[string]Decision{"demo/net-b": {Reasons: []Reason{{Code: "nad-allowlist", Message: "not for you"}}}}}
	_, err := f.p.Add(context.Background(), f.req)
	te := cniErr(t, err)
	if te.Code != codes.PolicyDenied || !strings.Contains(te.Msg, "pod demo/web") || !strings.Contains(te.Msg, "network demo/net-b") || !strings.Contains(te.Msg, "[nad-allowlist]: not for you") {
		t.Errorf("error %+v", te)
	}
	if len(f.cni.calls) != 0 {
		t.Errorf("delegates ran before the decision: %v", f.cni.calls)
	}
	if len(f.src.events) != 1 || !strings.HasPrefix(f.src.events[0], "Warning NetworkAttachmentDenied") {
		t.Errorf("events %q", f.src.events)
	}
}

func TestS7_4AuthorizerErrorFailsClosed(t *testing.T) {
	f := newFixture(t, "net-a")
	f.p.Stages.Authorizer = &fakeAuthorizer{err: errors.New("engine exploded")}
	_, err := f.p.Add(context.Background(), f.req)
	if te := cniErr(t, err); te.Code != codes.PolicyDenied || !strings.Contains(te.Msg, "policy.error") {
		t.Errorf("error %+v", te)
	}
}

type labelSource struct {
	*fakeSource
	calls int
}

func (s *labelSource) NamespaceLabels(context.Context, string) (map[string]string, error) {
	s.calls++
	return map[string]string{"team": "a"}, nil
}

func TestNamespaceLabelsOnlyWhenThePolicyReadsThem(t *testing.T) {
	for _, needs := range []bool{false, true} {
		f := newFixture(t, "net-a")
		src := &labelSource{fakeSource: f.src}
		f.p.Source = src
		a := &fakeAuthorizer{needsNS: needs}
		f.p.Stages.Authorizer = a
		if _, err := f.p.Add(context.Background(), f.req); err != nil {
			t.Fatal(err)
		}
		if (src.calls == 1) != needs || (a.sawLabels != nil) != needs {
			t.Errorf("needs=%v: %d lookups, labels %v", needs, src.calls, a.sawLabels)
		}
	}
}

func TestClusterNetworkIsNeverPlexusItself(t *testing.T) {
	for _, typ := range []string{"plexus", "plexus-shim"} {
		f := newFixture(t, "")
		writeFile(t, f.p.Config.ClusterNetwork, `{"cniVersion":"1.0.0","name":"plexus","type":"`+typ+`","daemonSocket":"/run/x.sock"}`)
		_, err := f.p.Add(context.Background(), f.req)
		if te := cniErr(t, err); te.Code != codes.ClusterNetwork || !strings.Contains(te.Msg, "plexus's own config") {
			t.Errorf("%s: error %+v", typ, te)
		}
		if len(f.cni.calls) != 0 {
			t.Errorf("%s: delegated to itself: %v", typ, f.cni.calls)
		}
	}
}

// TestRepeatedDelRunsNoDelegate: containerd repeats DEL without a netns
// after the first finished; plexus answers it from the tombstone. A DEL
// without a record and without a finished one still detaches the default
// network, and an ADD in between makes the next DEL a real one.
func TestRepeatedDelRunsNoDelegate(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(ctx, f.req); err != nil {
		t.Fatal(err)
	}
	if err := f.p.Del(ctx, f.req); err != nil {
		t.Fatal(err)
	}
	f.cni.calls = nil
	again := *f.req
	again.NetNS = ""
	if err := f.p.Del(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if len(f.cni.calls) != 0 {
		t.Errorf("repeated DEL ran delegates: %v", f.cni.calls)
	}

	for _, tc := range []struct {
		name string
		edit func(*Request)
		want []string
	}{
		{name: "another interface", edit: func(r *Request) { r.IfName = "eth1" }, want: []string{"DEL default-net eth1"}},
		{name: "another container", edit: func(r *Request) { r.ContainerID = "c2" }, want: []string{"DEL default-net eth0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.cni.calls = nil
			r := again
			tc.edit(&r)
			if err := f.p.Del(ctx, &r); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.cni.calls, tc.want) {
				t.Errorf("calls %v, want %v", f.cni.calls, tc.want)
			}
		})
	}

	t.Run("libcni still caches an attachment", func(t *testing.T) {
		f.cni.calls = nil
		f.cni.cached = []*libcni.NetworkAttachment{{ContainerID: "c1", Network: "lost", IfName: "net9", Config: []byte(`{"cniVersion":"1.0.0","name":"lost","type":"bridge"}`)}}
		defer func() { f.cni.cached = nil }()
		if err := f.p.Del(ctx, &again); err != nil {
			t.Fatal(err)
		}
		if want := []string{"DEL lost net9", "DEL default-net eth0"}; !reflect.DeepEqual(f.cni.calls, want) {
			t.Errorf("calls %v, want %v", f.cni.calls, want)
		}
	})

	t.Run("ADD in between", func(t *testing.T) {
		if _, err := f.p.Add(ctx, f.req); err != nil {
			t.Fatal(err)
		}
		if has(f.p.Deleted, "c1", "eth0") {
			t.Fatal("ADD left the tombstone")
		}
		// A record lost after the ADD: DEL must detach from the cache again.
		if err := f.p.Records.Remove("c1"); err != nil {
			t.Fatal(err)
		}
		f.cni.calls = nil
		if err := f.p.Del(ctx, &again); err != nil {
			t.Fatal(err)
		}
		if want := []string{"DEL default-net eth0"}; !reflect.DeepEqual(f.cni.calls, want) {
			t.Errorf("calls %v, want %v", f.cni.calls, want)
		}
	})

	t.Run("GC forgets containers the runtime does not list", func(t *testing.T) {
		if !has(f.p.Deleted, "c1", "eth0") {
			t.Fatal("no tombstone after a finished DEL")
		}
		if err := f.p.GC(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if has(f.p.Deleted, "c1", "eth0") {
			t.Error("GC kept the tombstone")
		}
	})
}

// TestDelWithoutRecordNamesTheDefaultNetwork: the default network is
// called by its configured name in logs and errors, not "default".
func TestDelWithoutRecordNamesTheDefaultNetwork(t *testing.T) {
	f := newFixture(t, "")
	f.cni.fail["DEL default-net"] = errors.New("stuck")
	err := f.p.Del(context.Background(), f.req)
	if te := cniErr(t, err); !strings.Contains(te.Msg, "default network default-net (eth0): stuck") {
		t.Errorf("error %+v", te)
	}
}

// TestNullPodAnnotationsAreNoAnnotations: containerd passes null for a
// sandbox without annotations; that is a pod without selections, which
// needs no pod read.
func TestNullPodAnnotationsAreNoAnnotations(t *testing.T) {
	f := newFixture(t, "net-a")
	f.req.RuntimeConfig = map[string]any{PodAnnotationsCapability: nil}
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ADD default-net eth0"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	if f.src.podReads != 0 || f.src.status == nil {
		t.Errorf("%d pod reads, status %s; want none and a status", f.src.podReads, f.src.status)
	}
}

// TestPodAnnotationsFromTheRuntime: with the runtime's pod annotations and
// K8S_POD_UID, the selection comes from the runtime and the pod is not read,
// unless something else needs the pod object.
func TestPodAnnotationsFromTheRuntime(t *testing.T) {
	runtimeSays := map[string]any{"k8s.v1.cni.cncf.io/networks": "net-b", configSourceAnnotation: "api"}
	for _, tc := range []struct {
		name     string
		edit     func(*fixture)
		readsPod bool
	}{
		{name: "annotations and UID", edit: func(*fixture) {}},
		{name: "no UID", edit: func(f *fixture) { f.req.Args = f.req.Args[:2] }, readsPod: true},
		{name: "no annotations", edit: func(f *fixture) { delete(f.req.RuntimeConfig, PodAnnotationsCapability) }, readsPod: true},
		{name: "annotations not strings", edit: func(f *fixture) {
			f.req.RuntimeConfig[PodAnnotationsCapability] = map[string]any{"k8s.v1.cni.cncf.io/networks": 7}
		}, readsPod: true},
		{name: "static pod", edit: func(f *fixture) {
			f.req.RuntimeConfig[PodAnnotationsCapability] = map[string]any{"k8s.v1.cni.cncf.io/networks": "net-b", configSourceAnnotation: "file"}
			f.src.pods["demo/web"].Annotations[MirrorAnnotation] = "u1"
		}, readsPod: true},
		{name: "a policy reads the pod", edit: func(f *fixture) { f.p.Stages.Authorizer = &fakeAuthorizer{} }, readsPod: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "net-a")
			f.req.RuntimeConfig = map[string]any{PodAnnotationsCapability: runtimeSays, "portMappings": []any{}}
			tc.edit(f)
			if _, err := f.p.Add(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			wantNet := "ADD net-b net1"
			if tc.readsPod {
				wantNet = "ADD net-a net1"
			}
			if want := []string{"ADD default-net eth0", wantNet}; !reflect.DeepEqual(f.cni.calls, want) {
				t.Errorf("calls %v, want %v", f.cni.calls, want)
			}
			if got := f.src.podReads == 1; got != tc.readsPod {
				t.Errorf("%d pod reads, want the pod read: %v", f.src.podReads, tc.readsPod)
			}
			if f.src.status == nil {
				t.Error("no network-status published")
			}
			// The default network declares no pod-annotations capability: the
			// annotations are neither handed on nor recorded.
			if _, leaked := f.cni.lastRT["default-net"].CapabilityArgs[PodAnnotationsCapability]; leaked {
				t.Error("the pod annotations reached a default network that did not declare the capability")
			}
			if _, kept := f.cni.lastRT["default-net"].CapabilityArgs["portMappings"]; !kept {
				t.Error("the other runtimeConfig keys did not reach the default network")
			}
		})
	}
}

// TestPodAnnotationsReachADefaultNetworkDeclaringThem: a default network
// plugin declaring the capability gets the annotations as the runtime sent them.
func TestPodAnnotationsReachADefaultNetworkDeclaringThem(t *testing.T) {
	f := newFixture(t, "")
	writeFile(t, f.p.Config.ClusterNetwork, `{"cniVersion":"1.0.0","name":"default-net","type":"bridge","capabilities":{"`+PodAnnotationsCapability+`":true}}`)
	ann := map[string]any{"a": "b"}
	f.req.RuntimeConfig = map[string]any{PodAnnotationsCapability: ann}
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if got := f.cni.lastRT["default-net"].CapabilityArgs[PodAnnotationsCapability]; !reflect.DeepEqual(got, ann) {
		t.Errorf("default network got %v, want %v", got, ann)
	}
}

// A DEL without a record still removes the CNI device-info file of each
// attachment it undoes from libcni's cache (device-info spec s4.2.1).
func TestDelWithoutRecordRemovesDeviceInfoFiles(t *testing.T) {
	f := newFixture(t, "")
	f.p.Config.DeviceInfoDir = t.TempDir()
	path, err := devinfo.Files{Dir: f.p.Config.DeviceInfoDir}.CNIFile("c1", "net9")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"type":"pci","version":"1.1.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f.cni.cached = []*libcni.NetworkAttachment{
		{ContainerID: "c1", Network: "lost", IfName: "net9", Config: []byte(`{"cniVersion":"1.0.0","name":"lost","type":"host-device"}`)},
	}
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("device-info file after DEL: %v", err)
	}
}

// statusGate is a source whose status PATCH waits for the event, or fails.
type statusGate struct {
	*fakeSource
	mu      sync.Mutex
	eventIn chan struct{}
	fail    error
}

func (s *statusGate) PublishStatus(ctx context.Context, pod *source.Pod, doc []byte) error {
	select {
	case <-s.eventIn:
	case <-time.After(5 * time.Second):
		return errors.New("the event was not sent while the status PATCH was in flight")
	}
	if s.fail != nil {
		return s.fail
	}
	return s.fakeSource.PublishStatus(ctx, pod, doc)
}

func (s *statusGate) Event(ctx context.Context, pod *source.Pod, typ source.EventType, reason, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fakeSource.Event(ctx, pod, typ, reason, msg)
	if reason == "AddedInterfaces" {
		close(s.eventIn)
	}
}

func TestAddSendsItsEventBesideTheStatusPatch(t *testing.T) {
	tests := []struct {
		name       string
		fail       error
		wantEvents []string
	}{
		{"patch succeeds", nil, []string{"Normal AddedInterfaces"}},
		{"patch fails: the failure follows", errors.New("forbidden"), []string{"Normal AddedInterfaces", "Warning NetworkAttachFailed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "net-a")
			src := &statusGate{fakeSource: f.src, eventIn: make(chan struct{}), fail: tt.fail}
			f.p.Source = src
			_, err := f.p.Add(context.Background(), f.req)
			if (err != nil) != (tt.fail != nil) {
				t.Fatalf("ADD err = %v, want failure %v", err, tt.fail)
			}
			if len(src.events) != len(tt.wantEvents) {
				t.Fatalf("events %q, want %q", src.events, tt.wantEvents)
			}
			for i, want := range tt.wantEvents {
				if !strings.HasPrefix(src.events[i], want) {
					t.Errorf("event %d = %q, want %s", i, src.events[i], want)
				}
			}
		})
	}
}

// TestDelListsLibcniCacheOnlyAcrossABoot: a record that ends a finished
// ADD, or a tombstone, saved since the node booted is trusted to list
// everything libcni cached for the container, so DEL does not list the
// cache; one from before the boot (or with the boot unknown), or a
// journal cut short, is not, and DEL undoes what the cache still holds.
func TestDelListsLibcniCacheOnlyAcrossABoot(t *testing.T) {
	const bootA, bootB = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	lost := []*libcni.NetworkAttachment{{ContainerID: "c1", Network: "lost", IfName: "net9", Config: []byte(`{"cniVersion":"1.0.0","name":"lost","type":"bridge"}`)}}
	boot := func(f *fixture, id string) { f.p.Records.Boot, f.p.Deleted.Boot = id, id }
	ctx := context.Background()
	for _, tc := range []struct {
		name             string
		addBoot, delBoot string
		cutShort         bool
		want             []string
	}{
		{"record of this boot", bootA, bootA, false, []string{"DEL net-a net1", "DEL default-net eth0"}},
		{"record of this boot cut short", bootA, bootA, true, []string{"DEL net-a net1", "DEL default-net eth0", "DEL lost net9"}},
		{"record of an earlier boot", bootA, bootB, false, []string{"DEL net-a net1", "DEL default-net eth0", "DEL lost net9"}},
		{"boot unknown", "", "", false, []string{"DEL net-a net1", "DEL default-net eth0", "DEL lost net9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "net-a")
			boot(f, tc.addBoot)
			if _, err := f.p.Add(ctx, f.req); err != nil {
				t.Fatal(err)
			}
			if tc.cutShort {
				// The journal's last line as it stood while net-a's delegate ran.
				rec, err := f.p.Records.Load("c1")
				if err != nil {
					t.Fatal(err)
				}
				rec.Attachments[len(rec.Attachments)-1].State = record.Attempted
				if err := f.p.Records.Save(rec); err != nil {
					t.Fatal(err)
				}
			}
			boot(f, tc.delBoot)
			f.cni.calls, f.cni.cached = nil, lost
			if err := f.p.Del(ctx, f.req); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.cni.calls, tc.want) {
				t.Errorf("DEL calls %v, want %v", f.cni.calls, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		delBoot string
		want    []string
	}{
		{"tombstone of this boot", bootA, nil},
		{"tombstone of an earlier boot", bootB, []string{"DEL lost net9", "DEL default-net eth0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "net-a")
			boot(f, bootA)
			if _, err := f.p.Add(ctx, f.req); err != nil {
				t.Fatal(err)
			}
			if err := f.p.Del(ctx, f.req); err != nil {
				t.Fatal(err)
			}
			boot(f, tc.delBoot)
			f.cni.calls, f.cni.cached = nil, lost
			again := *f.req
			again.NetNS = ""
			if err := f.p.Del(ctx, &again); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.cni.calls, tc.want) {
				t.Errorf("repeated DEL calls %v, want %v", f.cni.calls, tc.want)
			}
		})
	}
}

// has is Lookup's first answer: whether the tombstone is there.
func has(t *record.Tombstones, containerID, ifName string) bool {
	found, _ := t.Lookup(containerID, ifName)
	return found
}

func TestParseAheadSendsEachAttemptedAttachmentsListLastFirst(t *testing.T) {
	conf := func(name string) []byte {
		return []byte(`{"cniVersion":"1.0.0","name":"` + name + `","type":"bridge"}`)
	}
	atts := []record.Attachment{
		{Name: "a", Config: conf("net-a"), State: record.Attached},
		{Name: "b", Config: []byte(`{"name":`), State: record.Attempted},
		{Name: "c", Config: conf("net-c"), State: record.Planned},
		{Name: "d", Config: conf("net-d"), State: record.Attempted},
		{Name: "e", Config: conf("net-e"), State: record.Planned},
	}
	lists := parseAhead(atts)
	want := []struct {
		list    string
		wantErr bool
	}{
		{},              // e, planned: nothing parsed
		{list: "net-d"}, // d
		{},              // c, planned
		{wantErr: true}, // b, unparseable
		{list: "net-a"}, // a
	}
	for i, w := range want {
		got := <-lists
		if (got.err != nil) != w.wantErr {
			t.Errorf("list %d: err %v, want an error: %v", i, got.err, w.wantErr)
		}
		name := ""
		if got.list != nil {
			name = got.list.Name
		}
		if name != w.list {
			t.Errorf("list %d: %q, want %q", i, name, w.list)
		}
	}
}
