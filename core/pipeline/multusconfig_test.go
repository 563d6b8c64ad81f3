package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/status"
)

// withPodDefault is the fixture with NADs kube-system/calico and
// demo/calico-demo, and the pod annotated to choose its default network.
func withPodDefault(t *testing.T, networks, defaultNetwork string) *fixture {
	t.Helper()
	f := newFixture(t, networks)
	f.src.addNAD("kube-system", "calico", `{"cniVersion":"1.0.0","name":"calico","type":"ptp"}`)
	f.src.addNAD("demo", "calico-demo", `{"cniVersion":"1.0.0","name":"calico-demo","type":"ptp"}`)
	f.src.pods["demo/web"].Annotations[selection.DefaultNetworkAnnotation] = defaultNetwork
	return f
}

func statusOf(t *testing.T, f *fixture) []status.Entry {
	t.Helper()
	var st []status.Entry
	if err := json.Unmarshal(f.src.status, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPodDefaultNetworkReplacesTheClusterNetwork(t *testing.T) {
	tests := []struct{ annotation, want string }{
		{"calico", "calico"}, // no namespace: systemNamespace, where the cluster network's NAD lives
		{"kube-system/calico", "calico"},
		{"demo/calico-demo", "calico-demo"},
		{`{"name":"calico","namespace":"kube-system"}`, "calico"},
		{`[{"name":"calico-demo","namespace":"demo"}]`, "calico-demo"},
		{` {"name":"calico"} `, "calico"},
	}
	for _, tt := range tests {
		t.Run(tt.annotation, func(t *testing.T) {
			f := withPodDefault(t, "net-a", tt.annotation)
			if _, err := f.p.Add(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			want := []string{"ADD " + tt.want + " eth0", "ADD net-a net1"}
			if !reflect.DeepEqual(f.cni.calls, want) {
				t.Errorf("calls %v, want %v", f.cni.calls, want)
			}
			if st := statusOf(t, f); len(st) != 2 || !st[0].Default || st[0].Name != tt.want || st[0].Interface != "eth0" {
				t.Errorf("status %+v", st)
			}
		})
	}
}

// DEL undoes the network ADD attached, from the record, though the pod, its
// annotation and the NAD are gone and the cluster network's file changed.
func TestPodDefaultNetworkIsRecordedForDel(t *testing.T) {
	f := withPodDefault(t, "", "calico")
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	rec, err := f.p.Records.Load("c1")
	if err != nil || rec == nil || len(rec.Attachments) != 1 || !rec.Attachments[0].Default || rec.Attachments[0].Name != "calico" || !strings.Contains(string(rec.Attachments[0].Config), `"ptp"`) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	delete(f.src.pods, "demo/web")
	delete(f.src.nads, "kube-system/calico")
	writeFile(t, f.p.Config.ClusterNetwork, `{"cniVersion":"1.0.0","name":"other-net","type":"bridge"}`)
	f.cni.calls = nil
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL calico eth0"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
}

func TestPodDefaultNetworkInvalidFailsBeforeAnyDelegate(t *testing.T) {
	tests := []struct{ annotation, code, want string }{
		{"", "invalid", "empty"},
		{"Calico", "invalid", "DNS-1123"},
		{"../etc/passwd", "invalid", "DNS-1123"},
		{"kube-system/calico@eth1", "invalid", "no @interface"},
		{"calico,other", "invalid", "not one network reference"},
		{`[{"name":"calico"},{"name":"other"}]`, "invalid", "exactly one network"},
		{`{"name":"calico","interface":"eth9"}`, "invalid", `unknown field "interface"`},
		{`{"namespace":"kube-system"}`, "invalid", `"name" is required`},
		{"missing", "notfound", "kube-system/missing"},
	}
	for _, tt := range tests {
		t.Run(tt.annotation, func(t *testing.T) {
			f := withPodDefault(t, "net-a", tt.annotation)
			_, err := f.p.Add(context.Background(), f.req)
			te := cniErr(t, err)
			code := map[string]uint{"invalid": codes.InvalidSelection, "notfound": codes.NetworkNotFound}[tt.code]
			if te.Code != code || !strings.Contains(te.Msg, tt.want) {
				t.Errorf("error %+v, want code %d with %q", te, code, tt.want)
			}
			if len(f.cni.calls) != 0 {
				t.Errorf("delegates ran: %v", f.cni.calls)
			}
			if rec, _ := f.p.Records.Load("c1"); rec != nil {
				t.Error("a failed ADD left a record")
			}
			if len(f.src.events) != 1 || !strings.HasPrefix(f.src.events[0], "Warning ") {
				t.Errorf("events %q", f.src.events)
			}
		})
	}
}

type recordingAuthorizer struct {
	seen []string // "name origin default"
	deny string
}

func (a *recordingAuthorizer) Authorize(_ context.Context, req *AuthorizeRequest) (Decision, error) {
	at := req.Attachment
	a.seen = append(a.seen, at.Name+" "+string(at.Origin)+" "+map[bool]string{true: "default", false: "secondary"}[at.Default])
	if at.Name == a.deny {
		return Decision{Reasons: []Reason{{Code: "pod-default-network", Message: "not here"}}}, nil
	}
	return Decision{Allowed: true}, nil
}

// s7.4: the policy decides on what the pod chose, its default network
// included, and not on what the admin configured.
func TestPolicyDecidesOnThePodsChoicesOnly(t *testing.T) {
	f := withPodDefault(t, "net-a", "calico")
	f.p.Config.DefaultNetworks = []string{"demo/net-b"}
	a := &recordingAuthorizer{}
	f.p.Stages.Authorizer = a
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	want := []string{"calico podDefaultNetwork default", "demo/net-a selection secondary"}
	if !reflect.DeepEqual(a.seen, want) {
		t.Errorf("authorized %v, want %v", a.seen, want)
	}

	f = withPodDefault(t, "", "calico")
	a = &recordingAuthorizer{deny: "calico"}
	f.p.Stages.Authorizer = a
	_, err := f.p.Add(context.Background(), f.req)
	if te := cniErr(t, err); te.Code != codes.PolicyDenied || !strings.Contains(te.Msg, "[pod-default-network]: not here") {
		t.Errorf("error %+v", te)
	}
	if len(f.cni.calls) != 0 {
		t.Errorf("delegates ran before the decision: %v", f.cni.calls)
	}

	f = newFixture(t, "")
	a = &recordingAuthorizer{}
	f.p.Stages.Authorizer = a
	if _, err := f.p.Add(context.Background(), f.req); err != nil || len(a.seen) != 0 {
		t.Errorf("the cluster network was put to the policy: %v, %v", a.seen, err)
	}
}

func TestDefaultNetworksComeAfterTheDefaultAndBeforeSelections(t *testing.T) {
	tests := []struct {
		name      string
		podNS     string
		selection string
		want      []string
		wantErr   string
	}{
		{name: "every pod", selection: "net-a", want: []string{"ADD default-net eth0", "ADD net-b net1", "ADD net-c net2", "ADD net-a net3"}},
		{name: "selection names skip theirs", selection: `[{"name":"net-a","interface":"net5"},{"name":"net-a"}]`, want: []string{"ADD default-net eth0", "ADD net-b net1", "ADD net-c net2", "ADD net-a net5", "ADD net-a net3"}},
		{name: "system namespaces are exempt", podNS: "infra", selection: "net-a", want: []string{"ADD default-net eth0", "ADD net-a net1"}},
		{name: "a selection may not take their interface", selection: `[{"name":"net-a","interface":"net2"}]`, wantErr: "already used by defaultNetworks demo/net-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.selection)
			f.p.Config.DefaultNetworks = []string{"demo/net-b", "net-c"}
			f.p.Config.SystemNamespace = "demo" // where "net-c" is looked up
			f.p.Config.SystemNamespaces = []string{"kube-system", "infra"}
			if tt.podNS != "" {
				pod := f.src.pods["demo/web"]
				pod.Namespace = tt.podNS
				f.src.pods[tt.podNS+"/web"] = pod
				f.src.addNAD(tt.podNS, "net-a", `{"cniVersion":"1.0.0","name":"net-a","type":"bridge"}`)
				f.req.Args[0][1] = tt.podNS
			}
			_, err := f.p.Add(context.Background(), f.req)
			if tt.wantErr != "" {
				if te := cniErr(t, err); !strings.Contains(te.Msg, tt.wantErr) || len(f.cni.calls) != 0 {
					t.Errorf("error %+v, calls %v", te, f.cni.calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.cni.calls, tt.want) {
				t.Errorf("calls %v, want %v", f.cni.calls, tt.want)
			}
			if st := statusOf(t, f); len(st) != len(tt.want) {
				t.Errorf("status has %d entries for %d attachments", len(st), len(tt.want))
			}
		})
	}
}

func TestDefaultNetworksMissingNADFailsTheAdd(t *testing.T) {
	f := newFixture(t, "net-a")
	f.p.Config.DefaultNetworks = []string{"demo/absent"}
	_, err := f.p.Add(context.Background(), f.req)
	if te := cniErr(t, err); te.Code != codes.NetworkNotFound || !strings.Contains(te.Msg, "demo/absent") || len(f.cni.calls) != 0 {
		t.Errorf("error %+v, calls %v", te, f.cni.calls)
	}
}

func TestReadinessIndicatorFile(t *testing.T) {
	t.Run("absent: fails clearly, nothing attached", func(t *testing.T) {
		f := newFixture(t, "net-a")
		f.p.Config.ReadinessIndicatorFile = filepath.Join(t.TempDir(), "10-calico.conflist")
		f.p.Config.ReadinessTimeout = config.Duration(300 * time.Millisecond)
		_, err := f.p.Add(context.Background(), f.req)
		te := cniErr(t, err)
		if te.Code != codes.ClusterNetwork || !strings.Contains(te.Msg, "10-calico.conflist did not appear within 300ms") {
			t.Errorf("error %+v", te)
		}
		if len(f.cni.calls) != 0 {
			t.Errorf("delegates ran: %v", f.cni.calls)
		}
	})
	t.Run("appearing while ADD waits", func(t *testing.T) {
		f := newFixture(t, "net-a")
		path := filepath.Join(t.TempDir(), "ready")
		f.p.Config.ReadinessIndicatorFile = path
		f.p.Config.ReadinessTimeout = config.Duration(time.Minute)
		go func() {
			time.Sleep(200 * time.Millisecond)
			os.WriteFile(path, nil, 0o644)
		}()
		if _, err := f.p.Add(context.Background(), f.req); err != nil {
			t.Fatal(err)
		}
		if len(f.cni.calls) != 2 {
			t.Errorf("calls %v", f.cni.calls)
		}
	})
	t.Run("the call's context bounds the wait", func(t *testing.T) {
		f := newFixture(t, "")
		f.p.Config.ReadinessIndicatorFile = filepath.Join(t.TempDir(), "never")
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := f.p.Add(ctx, f.req)
		if te := cniErr(t, err); !strings.Contains(te.Msg, "does not exist") {
			t.Errorf("error %+v", te)
		}
	})
}

func TestDelegatesIsAnInlineDefaultNetwork(t *testing.T) {
	f := newFixture(t, "net-a")
	f.p.Config.ClusterNetwork = ""
	f.p.Config.Delegates = []json.RawMessage{json.RawMessage(`{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"type":"ptp"},{"type":"portmap","capabilities":{"portMappings":true}}]}`)}
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ADD k8s-pod-network eth0", "ADD net-a net1"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
	// Without a record, DEL still finds it: it is in the config.
	if err := f.p.Records.Remove("c1"); err != nil {
		t.Fatal(err)
	}
	f.cni.calls = nil
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEL k8s-pod-network eth0"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
}

// libcni's subdirectory chains: a config list's plugins may live in
// <dir>/<name>/*.conf; plexus inlines them, so the record holds them.
func TestSubdirectoryChainsAreInlined(t *testing.T) {
	tests := []struct {
		name, main string
		files      map[string]string
		aux        string
		want       string
	}{
		{name: "list without plugins", main: `{"cniVersion":"1.1.0","name":"cluster"}`,
			files: map[string]string{"cluster/10-ptp.conf": `{"type":"ptp"}`, "cluster/20-portmap.conf": `{"type":"portmap"}`},
			want:  `ptp,portmap`},
		{name: "list with plugins gets more", main: `{"cniVersion":"1.1.0","name":"cluster","plugins":[{"type":"bridge"}]}`,
			files: map[string]string{"cluster/10-tuning.conf": `{"type":"tuning"}`},
			want:  `bridge,tuning`},
		{name: "loadOnlyInlinedPlugins keeps the list", main: `{"cniVersion":"1.1.0","name":"cluster","loadOnlyInlinedPlugins":true,"plugins":[{"type":"bridge"}]}`,
			files: map[string]string{"cluster/10-tuning.conf": `{"type":"tuning"}`},
			want:  `bridge`},
		{name: "auxiliaryCNIChainName", main: `{"cniVersion":"1.0.0","name":"cluster","type":"bridge"}`,
			files: map[string]string{"extras/10-bandwidth.conf": `{"type":"bandwidth"}`, "cluster/10-ignored.conf": `{"type":"tuning"}`},
			aux:   "extras", want: `bridge,bandwidth`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, "")
			dir := filepath.Dir(f.p.Config.ClusterNetwork)
			f.p.Config.ClusterNetwork = filepath.Join(dir, "10-cluster.conflist")
			f.p.Config.AuxiliaryCNIChainName = tt.aux
			writeFile(t, f.p.Config.ClusterNetwork, tt.main)
			for name, c := range tt.files {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, name), c)
			}
			if _, err := f.p.Add(context.Background(), f.req); err != nil {
				t.Fatal(err)
			}
			var list struct {
				Plugins []struct{ Type string } `json:"plugins"`
			}
			if err := json.Unmarshal(f.cni.lastConf["cluster"], &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range list.Plugins {
				got = append(got, p.Type)
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("plugins %v, want %s", got, tt.want)
			}
			rec, _ := f.p.Records.Load("c1")
			if rec == nil || !strings.Contains(string(rec.Attachments[0].Config), `"`+got[len(got)-1]+`"`) {
				t.Errorf("record lacks the chain: %+v", rec)
			}
		})
	}
}

// With compat off the pod's default-network annotation is not read: the
// spec's cluster-wide default network (s6) is every pod's.
func TestPodDefaultNetworkNeedsCompat(t *testing.T) {
	f := withPodDefault(t, "net-a", "calico")
	f.p.Config.Compat = config.CompatOff
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ADD default-net eth0", "ADD net-a net1"}; !reflect.DeepEqual(f.cni.calls, want) {
		t.Errorf("calls %v, want %v", f.cni.calls, want)
	}
}

// The NetworkNotFound event names the missing NAD once.
func TestPodDefaultNotFoundEventNamesTheNADOnce(t *testing.T) {
	f := withPodDefault(t, "", "kube-system/absent")
	if _, err := f.p.Add(context.Background(), f.req); err == nil {
		t.Fatal("ADD with a missing default network succeeded")
	}
	ev := strings.Join(f.src.events, "\n")
	if !strings.Contains(ev, "NetworkNotFound: default network ("+selection.DefaultNetworkAnnotation+"): NetworkAttachmentDefinition kube-system/absent: ") ||
		strings.Count(ev, "kube-system/absent") != 1 {
		t.Errorf("events %q: want NetworkNotFound naming kube-system/absent once", f.src.events)
	}
}
