package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

func attached(name, ifName string, caps map[string]any) record.Attachment {
	return record.Attachment{Name: name, IfName: ifName, Config: []byte(`{}`), State: record.Attached, CapabilityArgs: caps}
}

func TestDiffAttachmentsMatchesByNetworkInterfaceAndRequests(t *testing.T) {
	def := record.Attachment{Name: "default-net", Default: true, IfName: "eth0", Config: []byte(`{}`), State: record.Attached}
	rec := func(as ...record.Attachment) *record.Record {
		return &record.Record{Attachments: append([]record.Attachment{def}, as...)}
	}
	tests := []struct {
		name       string
		rec        *record.Record
		annotation string
		keep       map[int]int
		detach     []int
		attach     []int
		ifNames    []string
		wantErr    string
	}{
		{"unchanged", rec(attached("d/a", "net1", nil), attached("d/b", "net2", nil)), "a,b",
			map[int]int{0: 1, 1: 2}, nil, nil, []string{"net1", "net2"}, ""},
		{"added keeps the others' names", rec(attached("d/a", "net1", nil)), "a,b",
			map[int]int{0: 1}, nil, []int{1}, []string{"net1", "net2"}, ""},
		{"removed first: the second keeps net2", rec(attached("d/a", "net1", nil), attached("d/b", "net2", nil)), "b",
			map[int]int{0: 2}, []int{1}, nil, []string{"net2"}, ""},
		{"new element takes the first free name", rec(attached("d/b", "net2", nil)), "b,c",
			map[int]int{0: 1}, nil, []int{1}, []string{"net2", "net1"}, ""},
		{"interface renamed: detach and attach", rec(attached("d/a", "net1", nil)), `[{"name":"a","interface":"data0"}]`,
			map[int]int{}, []int{1}, []int{0}, []string{"data0"}, ""},
		{"requested ips changed", rec(attached("d/a", "net1", map[string]any{"ips": []any{"10.1.0.5/24"}})), `[{"name":"a","ips":["10.1.0.6/24"]}]`,
			map[int]int{}, []int{1}, []int{0}, []string{"net1"}, ""},
		{"requested ips same", rec(attached("d/a", "net1", map[string]any{"ips": []any{"10.1.0.5/24"}})), `[{"name":"a","ips":["10.1.0.5/24"]}]`,
			map[int]int{0: 1}, nil, nil, []string{"net1"}, ""},
		{"mac added", rec(attached("d/a", "net1", nil)), `[{"name":"a","mac":"02:00:00:00:00:09"}]`,
			map[int]int{}, []int{1}, []int{0}, []string{"net1"}, ""},
		{"same network twice, one removed", rec(attached("d/a", "net1", nil), attached("d/a", "net2", nil)), "a",
			map[int]int{0: 1}, []int{2}, nil, []string{"net1"}, ""},
		{"attempted is redone", rec(record.Attachment{Name: "d/a", IfName: "net1", Config: []byte(`{}`), State: record.Attempted}), "a",
			map[int]int{}, []int{1}, []int{0}, []string{"net1"}, ""},
		{"planned is dropped, not detached", rec(record.Attachment{Name: "d/a", IfName: "net1", Config: []byte(`{}`), State: record.Planned}), "",
			map[int]int{}, nil, nil, []string{}, ""},
		{"all removed, default untouched", rec(attached("d/a", "net1", nil)), "",
			map[int]int{}, []int{1}, nil, []string{}, ""},
		{"requested name held by a kept one", rec(attached("d/a", "data0", nil)), `[{"name":"a","interface":"data0"},{"name":"b","interface":"data0"}]`,
			nil, nil, nil, nil, `requests interface "data0", already used by selection element 0`},
		{"requested the default's name", rec(), `[{"name":"a","interface":"eth0"}]`,
			nil, nil, nil, nil, `already used by the default network`},
		{"unnamed one yields its name to a requested one", rec(attached("d/a", "net1", nil)), `[{"name":"a"},{"name":"b","interface":"net1"}]`,
			map[int]int{}, []int{1}, []int{0, 1}, []string{"net2", "net1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := selection.Parse(tt.annotation, "d")
			if err != nil {
				t.Fatal(err)
			}
			d, err := DiffAttachments(tt.rec, res.Elements)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.Keep, tt.keep) || !reflect.DeepEqual(d.Detach, tt.detach) || !reflect.DeepEqual(d.Attach, tt.attach) || !reflect.DeepEqual(d.IfNames, tt.ifNames) {
				t.Errorf("diff = keep %v detach %v attach %v ifNames %v\nwant  keep %v detach %v attach %v ifNames %v",
					d.Keep, d.Detach, d.Attach, d.IfNames, tt.keep, tt.detach, tt.attach, tt.ifNames)
			}
		})
	}
}

// updateFixture is a pod ADDed with networks, then its annotation set to
// now; the delegate calls of the ADD are forgotten.
func updateFixture(t *testing.T, networks, now string) *fixture {
	t.Helper()
	f := newFixture(t, networks)
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	pod := f.src.pods["demo/web"]
	pod.Annotations[status.Annotation] = string(f.src.status)
	pod.Annotations[selection.Annotation] = now
	f.cni.calls = nil
	f.src.events = nil
	return f
}

func (f *fixture) update(t *testing.T) (*Change, error) {
	t.Helper()
	return f.p.Update(context.Background(), &Request{ContainerID: f.req.ContainerID, NetNS: "/proc/1/ns/net"}, f.src.pods["demo/web"])
}

func (f *fixture) recordNames(t *testing.T) []string {
	t.Helper()
	rec, err := f.p.Records.Load(f.req.ContainerID)
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	var out []string
	for _, a := range rec.Attachments {
		out = append(out, label(a.Name, a.IfName)+" "+string(a.State))
	}
	return out
}

func (f *fixture) statusNames(t *testing.T) []string {
	t.Helper()
	var st []status.Entry
	if err := json.Unmarshal(f.src.status, &st); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range st {
		out = append(out, label(e.Name, e.Interface))
	}
	return out
}

func TestUpdateAttachesAndDetachesLeavingTheDefaultAlone(t *testing.T) {
	f := updateFixture(t, "net-a,net-b", "net-b,net-c")
	ch, err := f.update(t)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL net-a net1", "ADD net-c net1"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	if got := f.cni.lastRT["net-c"].NetNS; got != "/proc/1/ns/net" {
		t.Errorf("delegate netns %q, want the runtime's", got)
	}
	if !reflect.DeepEqual(ch.Attached, []string{"demo/net-c (net1)"}) || !reflect.DeepEqual(ch.Detached, []string{"demo/net-a (net1)"}) {
		t.Errorf("change %+v", ch)
	}
	want := []string{"default-net (eth0) attached", "demo/net-b (net2) attached", "demo/net-c (net1) attached"}
	if got := f.recordNames(t); !reflect.DeepEqual(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
	if got, want := f.statusNames(t), []string{"default-net (eth0)", "demo/net-b (net2)", "demo/net-c (net1)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("status %v, want %v", got, want)
	}
	if len(f.src.events) != 2 || !strings.Contains(f.src.events[0], "RemovedInterfaces") || !strings.Contains(f.src.events[1], "AddedInterfaces") {
		t.Errorf("events %v", f.src.events)
	}
	// A DEL of the pod now undoes the hot-plugged attachment too.
	f.cni.calls = nil
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL net-c net1", "DEL net-b net2", "DEL default-net eth0"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("DEL calls %v, want %v", f.cni.calls, want)
	}
}

func TestUpdateUnchangedDoesNothing(t *testing.T) {
	f := updateFixture(t, "net-a", "net-a")
	ch, err := f.update(t)
	if err != nil || !reflect.DeepEqual(ch, &Change{}) || len(f.cni.calls) != 0 {
		t.Fatalf("change %+v err %v calls %v", ch, err, f.cni.calls)
	}
}

func TestUpdateFailureLeavesThePodAsItWas(t *testing.T) {
	tests := []struct {
		name      string
		now       string
		setup     func(f *fixture)
		code      uint
		wantCalls []string
		event     string
	}{
		{"delegate fails: added undone, removed re-attached", `[{"name":"net-b","interface":"data0"},{"name":"net-c"}]`, func(f *fixture) { f.cni.fail["ADD net-c"] = errors.New("boom") },
			codes.AttachFailed, []string{"DEL net-a net1", "ADD net-b data0", "ADD net-c net1", "DEL net-c net1", "DEL net-b data0", "ADD net-a net1"}, "NetworkAttachFailed"},
		{"policy denies: nothing runs", "net-a,net-c", func(f *fixture) {
			f.p.Stages.Authorizer = denyNetwork("demo/net-c")
		}, codes.PolicyDenied, nil, "NetworkAttachmentDenied"},
		{"missing NAD: nothing runs", "net-a,net-x", nil, codes.NetworkNotFound, nil, "NetworkNotFound"},
		{"requested MAC not honored", `[{"name":"net-a"},{"name":"net-c","mac":"02:00:00:00:00:09"}]`, nil,
			codes.NotHonored, []string{"ADD net-c net2", "DEL net-c net2"}, "NetworkAttachFailed"},
		{"invalid annotation: kept", `[{"name":`, nil, codes.InvalidSelection, nil, "NetworkChangeFailed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := updateFixture(t, "net-a", tt.now)
			before := f.recordNames(t)
			statusBefore := string(f.src.status)
			if tt.setup != nil {
				tt.setup(f)
			}
			_, err := f.update(t)
			if te := cniErr(t, err); te.Code != tt.code {
				t.Fatalf("code %d (%v), want %d", te.Code, err, tt.code)
			}
			if !reflect.DeepEqual(f.cni.calls, tt.wantCalls) {
				t.Errorf("calls %v, want %v", f.cni.calls, tt.wantCalls)
			}
			if got := f.recordNames(t); !reflect.DeepEqual(got, before) {
				t.Errorf("record %v, want as before %v", got, before)
			}
			if string(f.src.status) != statusBefore {
				t.Errorf("status changed to %s", f.src.status)
			}
			if !strings.Contains(strings.Join(f.src.events, "\n"), "Warning "+tt.event) {
				t.Errorf("events %v, want a Warning %s", f.src.events, tt.event)
			}
		})
	}
}

func TestUpdateWithoutRecordOrForAnotherPod(t *testing.T) {
	f := updateFixture(t, "net-a", "net-b")
	other := *f.src.pods["demo/web"]
	other.UID = "u2"
	if _, err := f.p.Update(context.Background(), &Request{ContainerID: "c1", NetNS: "/x"}, &other); cniErr(t, err).Code != codes.PodLookup {
		t.Errorf("another pod's UID: %v", err)
	}
	if _, err := f.p.Update(context.Background(), &Request{ContainerID: "c2", NetNS: "/x"}, f.src.pods["demo/web"]); !errors.Is(err, ErrNoRecord) {
		t.Errorf("no record: %v", err)
	}
	if len(f.cni.calls) != 0 {
		t.Errorf("calls %v", f.cni.calls)
	}
}

func TestUpdateRepublishesStaleStatus(t *testing.T) {
	f := updateFixture(t, "net-a", "net-a")
	f.src.pods["demo/web"].Annotations[status.Annotation] = `[]`
	ch, err := f.update(t)
	if err != nil || !ch.Republished {
		t.Fatalf("change %+v err %v", ch, err)
	}
	if got, want := f.statusNames(t), []string{"default-net (eth0)", "demo/net-a (net1)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("status %v, want %v", got, want)
	}
}

type denyNetwork string

func (d denyNetwork) Authorize(_ context.Context, req *AuthorizeRequest) (Decision, error) {
	if req.Attachment.Name == string(d) {
		return Decision{Reasons: []Reason{{Code: "test.denied", Message: "not this one"}}}, nil
	}
	return Decision{Allowed: true}, nil
}

var _ source.Source = (*fakeSource)(nil)

// An attachment a crash left attempted (plexusd killed during its
// delegate) is detached and attached again; the record ends attached.
func TestUpdateRedoesAnAttemptedAttachment(t *testing.T) {
	f := updateFixture(t, "net-a", "net-a")
	rec, err := f.p.Records.Load("c1")
	if err != nil {
		t.Fatal(err)
	}
	rec.Attachments[1].State = record.Attempted
	if err := f.p.Records.Save(rec); err != nil {
		t.Fatal(err)
	}
	if !NeedsUpdate(rec, f.src.pods["demo/web"], selection.ParseOptions{}) {
		t.Fatal("NeedsUpdate = false for an attempted attachment")
	}
	if _, err := f.update(t); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL net-a net1", "ADD net-a net1"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	if got, want := f.recordNames(t), []string{"default-net (eth0) attached", "demo/net-a (net1) attached"}; !reflect.DeepEqual(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
}

// A removed network whose DEL fails stays in the record (the pod's DEL
// tries it again), one detached before it is attached again, and the
// change reports code 109 with a Warning.
func TestUpdateDetachFailureKeepsItRecorded(t *testing.T) {
	f := updateFixture(t, "net-a,net-b", "net-c")
	f.cni.fail["DEL net-a"] = errors.New("busy")
	_, err := f.update(t)
	if te := cniErr(t, err); te.Code != codes.DetachFailed {
		t.Fatalf("code %d (%v), want %d", te.Code, err, codes.DetachFailed)
	}
	if got, want := f.recordNames(t), []string{"default-net (eth0) attached", "demo/net-a (net1) attached", "demo/net-b (net2) attached"}; !reflect.DeepEqual(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
	if want := []string{"DEL net-b net2", "DEL net-a net1", "ADD net-b net2"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	if !strings.Contains(strings.Join(f.src.events, "\n"), "Warning NetworkDetachFailed") {
		t.Errorf("events %v", f.src.events)
	}
}

// defaultNetworks are the admin's, not the pod's: a selection change never
// detaches them, and new interfaces skip their names.
func TestUpdateLeavesDefaultNetworksAlone(t *testing.T) {
	f := newFixture(t, "net-a")
	f.p.Config.DefaultNetworks = []string{"demo/net-b"}
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	pod := f.src.pods["demo/web"]
	pod.Annotations[status.Annotation] = string(f.src.status)
	pod.Annotations[selection.Annotation] = "net-c"
	f.cni.calls = nil
	if _, err := f.update(t); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL net-a net2", "ADD net-c net2"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	want := []string{"default-net (eth0) attached", "demo/net-b (net1) attached", "demo/net-c (net2) attached"}
	if got := f.recordNames(t); !reflect.DeepEqual(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
}

// A device network is not hot-plugged: Update refuses it by name before
// any delegate runs, and the pod keeps what it has.
func TestUpdateRefusesDeviceNetworks(t *testing.T) {
	f := updateFixture(t, "net-a", "net-a,sriov")
	f.src.addNAD("demo", "sriov", `{"cniVersion":"1.0.0","name":"sriov","type":"host-device"}`)
	f.src.nads["demo/sriov"].Annotations = map[string]string{ResourceNameAnnotation: "vendor.example/netdev"}
	_, err := f.update(t)
	if te := cniErr(t, err); te.Code != codes.InvalidSelection || !strings.Contains(te.Msg, "demo/sriov") || len(f.cni.calls) != 0 {
		t.Errorf("error %+v, calls %v", te, f.cni.calls)
	}
	if got, want := f.recordNames(t), []string{"default-net (eth0) attached", "demo/net-a (net1) attached"}; !reflect.DeepEqual(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
	// A refused change is a Warning on the pod, as every other refusal.
	if n := len(f.src.events); n == 0 || !strings.Contains(f.src.events[n-1], "NetworkChangeFailed") || !strings.Contains(f.src.events[n-1], "demo/sriov") {
		t.Errorf("events %q, want NetworkChangeFailed naming demo/sriov", f.src.events)
	}
}

func TestRepublishRestoresAStatusThatNeverReachedThePod(t *testing.T) {
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	published := f.src.status
	pod := f.src.pods["demo/web"] // as the API has it: the ADD's PATCH was lost
	f.src.status = nil

	wrote, err := f.p.Republish(context.Background(), f.req.ContainerID, pod)
	if err != nil || !wrote {
		t.Fatalf("Republish = %v, %v; want the status written", wrote, err)
	}
	var got, want []status.Entry
	if err := json.Unmarshal(f.src.status, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(published, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0].Name != want[0].Name || got[1].Interface != want[1].Interface || !got[0].Default {
		t.Errorf("republished %s, want the ADD's %s", f.src.status, published)
	}

	pod.Annotations[status.Annotation] = string(published)
	f.src.status = nil
	if wrote, err := f.p.Republish(context.Background(), f.req.ContainerID, pod); err != nil || wrote || f.src.status != nil {
		t.Errorf("a current status: Republish = %v, %v (wrote %s); want nothing written", wrote, err, f.src.status)
	}
}

func TestRepublishRefusesWhatIsNotThePodsSettledRecord(t *testing.T) {
	f := newFixture(t, "net-a")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	other := &source.Pod{Namespace: "demo", Name: "web", UID: "u2"}
	tests := []struct {
		name      string
		container string
		pod       *source.Pod
		want      error
	}{
		{"no record", "c-unknown", f.src.pods["demo/web"], ErrNoRecord},
		{"the pod was re-created under its name", f.req.ContainerID, other, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.src.status = nil
			wrote, err := f.p.Republish(context.Background(), tt.container, tt.pod)
			if wrote || err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || f.src.status != nil {
				t.Errorf("Republish = %v, %v; want a refusal (%v) and nothing written", wrote, err, tt.want)
			}
		})
	}
}
