package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	plexusfake "github.com/plexus-cni/plexus/core/api/client/clientset/versioned/fake"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

const (
	bridgeConf = `{"cniVersion":"1.0.0","type":"bridge","ipam":{"type":"host-local"}}`
	podUID     = "0f2c6d3e-1111-4222-8333-944455556666"
)

// fakeCluster holds the objects a case starts with.
type fakeCluster struct {
	pods       []*corev1.Pod
	nads       []*unstructured.Unstructured
	events     []*corev1.Event
	namespaces []*corev1.Namespace
	// plexus are PlexusNodes and AttachmentPolicies.
	plexus []runtime.Object
}

func (f fakeCluster) cluster(t *testing.T) *Cluster {
	t.Helper()
	var objs []runtime.Object
	for _, p := range f.pods {
		objs = append(objs, p)
	}
	for _, e := range f.events {
		objs = append(objs, e)
	}
	for _, n := range f.namespaces {
		objs = append(objs, n)
	}
	gvr := schema.GroupVersionResource{Group: nad.Group, Version: nad.Version, Resource: nad.Resource}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvr: nad.Kind + "List",
	})
	// Created through the client: the constructor would file them under
	// a resource guessed from the kind, not the CRD's plural.
	for _, n := range f.nads {
		if _, err := dyn.Resource(gvr).Namespace(n.GetNamespace()).Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &Cluster{Core: fake.NewClientset(objs...), Dynamic: dyn, Plexus: plexusfake.NewClientset(f.plexus...)}
}

func testPod(ns, name string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(podUID), Annotations: ann},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
	}
}

func testNAD(ns, name, config string, ann map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"namespace": ns, "name": name}
	if ann != nil {
		meta["annotations"] = ann
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nad.Group + "/" + nad.Version, "kind": nad.Kind,
		"metadata": meta, "spec": map[string]any{"config": config},
	}}
}

func networks(v string) map[string]string { return map[string]string{"k8s.v1.cni.cncf.io/networks": v} }

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// isolation enables the library's namespace_isolation rule.
func isolation(t *testing.T) []string {
	return []string{"../../../../policies/library", writeFile(t, "isolation.yaml", "plexus:\n  config:\n    namespace_isolation:\n      enabled: true\n")}
}

// TestExplainDiagnoses: each broken pod gets its diagnosis, a healthy one
// none.
func TestExplainDiagnoses(t *testing.T) {
	tests := []struct {
		name     string
		ann      map[string]string
		policies bool
		ext      string // extensions config
		want     []string
		check    func(t *testing.T, r *Report)
	}{
		{
			name: "healthy", ann: networks("blue"),
			check: func(t *testing.T, r *Report) {
				a := r.Attachments[0]
				if a.Interface != "net1" || !a.NAD.ConfigValid || strings.Join(a.NAD.PluginTypes, ",") != "bridge" || a.Policy.Note != NoPolicyNote {
					t.Errorf("attachment %+v", a)
				}
			},
		},
		{
			name: "invalid JSON", ann: networks(`[{"name":"blue"},{"name":"red","ips":"10.0.0.1"}]`),
			want: []string{`element 1: key "ips": must be a list of strings`, "default network only"},
			check: func(t *testing.T, r *Report) {
				if r.Annotation.Valid || r.Annotation.ErrorElement == nil || *r.Annotation.ErrorElement != 1 || len(r.Attachments) != 0 {
					t.Errorf("annotation %+v", r.Annotation)
				}
			},
		},
		{
			name: "not JSON at all", ann: networks(`[{"name":"blue"`),
			want: []string{"not a JSON list"},
			check: func(t *testing.T, r *Report) {
				if r.Annotation.ErrorElement != nil {
					t.Errorf("error placed at element %d, want the whole annotation", *r.Annotation.ErrorElement)
				}
			},
		},
		{name: "missing NAD", ann: networks("gone"), want: []string{"selection element 0 (team-a/gone): not found (s3.4)"}},
		{name: "invalid config", ann: networks("slash"), want: []string{"invalid config (s3.4.1)", `plugin type "x/bridge"`}},
		{
			name: "cross-namespace denied", ann: networks("team-b/red"), policies: true,
			want: []string{"denied by policy [namespace-isolation]", "team-b/red"},
			check: func(t *testing.T, r *Report) {
				d := r.Attachments[0].Policy
				if !d.Evaluated || d.Allowed || d.Reasons[0].Code != "namespace-isolation" {
					t.Errorf("decision %+v", d)
				}
			},
		},
		{name: "same namespace allowed", ann: networks("blue"), policies: true},
		{
			name: "unowned key fails", ann: networks(`[{"name":"blue","com.other.vlan":7}]`),
			ext:  `{"unownedKeys":"fail","modules":[]}`,
			want: []string{`selection element 0 (team-a/blue): no extension owns key "com.other.vlan": the ADD fails (code 103)`},
		},
		{name: "interface taken", ann: networks(`[{"name":"blue","interface":"eth0"}]`), want: []string{`requests interface "eth0", already used by the default network`}},
		{name: "bad default network", ann: map[string]string{"v1.multus-cni.io/default-network": "calico@eth0"}, want: []string{"default-network annotation", "the ADD fails"}},
		{name: "missing default network", ann: map[string]string{"v1.multus-cni.io/default-network": "calico"}, want: []string{"default network kube-system/calico: not found"}},
		{name: "claim the pod lacks", ann: networks("claimed"), want: []string{`the NAD names resource claim "nics", which the pod does not have (spec.resourceClaims: none)`}},
		{
			name: "status misses a network",
			ann:  map[string]string{"k8s.v1.cni.cncf.io/networks": "blue", "k8s.v1.cni.cncf.io/network-status": `[{"name":"pod-net","interface":"eth0","ips":["10.0.0.5"],"default":true}]`},
			want: []string{"has no entry for it on net1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := fakeCluster{
				pods: []*corev1.Pod{testPod("team-a", "web", tt.ann)},
				nads: []*unstructured.Unstructured{
					testNAD("team-a", "blue", bridgeConf, nil),
					testNAD("team-b", "red", bridgeConf, nil),
					testNAD("team-a", "slash", `{"cniVersion":"1.0.0","type":"x/bridge"}`, nil),
					testNAD("team-a", "claimed", bridgeConf, map[string]any{"plexus.io/resource-claim": "nics"}),
				},
			}
			opts := Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t)}
			if tt.policies {
				opts.Policies = isolation(t)
			}
			if tt.ext != "" {
				opts.ExtensionsFile = writeFile(t, "ext.json", tt.ext)
			}
			r, err := Explain(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			checkProblems(t, r, tt.want)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// checkProblems wants each string in some problem, and no problem when
// none is wanted.
func checkProblems(t *testing.T, r *Report, want []string) {
	t.Helper()
	all := strings.Join(r.Problems, "\n")
	if r.OK != (len(want) == 0) {
		t.Errorf("OK = %v, problems:\n%s", r.OK, all)
	}
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no problem mentions %q; problems:\n%s", w, all)
		}
	}
}

// TestExplainLastAdd: status, condition and events, warnings first.
func TestExplainLastAdd(t *testing.T) {
	ann := networks("blue")
	ann["k8s.v1.cni.cncf.io/network-status"] = `[{"name":"pod-net","interface":"eth0","ips":["10.0.0.5"],"default":true},{"name":"team-a/blue","interface":"net1","ips":["10.1.0.7"],"default":false}]`
	pod := testPod("team-a", "web", ann)
	pod.Status.Conditions = []corev1.PodCondition{{Type: ConditionType, Status: corev1.ConditionTrue, Reason: "Applied", Message: "attached team-a/blue"}}
	now := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	ev := func(name, typ, reason string, at time.Time, uid string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "web", UID: types.UID(uid)},
			Type:           typ, Reason: reason, Message: reason + " happened", LastTimestamp: metav1.NewTime(at),
			Source: corev1.EventSource{Component: "plexus", Host: "node-1"},
		}
	}
	fc := fakeCluster{
		pods: []*corev1.Pod{pod},
		nads: []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil)},
		events: []*corev1.Event{
			ev("e1", "Normal", "Scheduled", now, podUID),
			ev("e2", "Warning", "NetworkSelectionWarning", now.Add(-time.Minute), podUID),
			ev("e3", "Normal", "Pulled", now.Add(time.Minute), podUID),
			ev("e4", "Warning", "OldIncarnation", now, "another-uid"),
		},
	}
	r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, r, nil)
	l := r.LastAdd
	if !l.StatusPresent || len(l.Status) != 2 || l.Status[1].Interface != "net1" || !l.Status[0].Default {
		t.Errorf("status %+v", l.Status)
	}
	if l.Condition == nil || l.Condition.Reason != "Applied" {
		t.Errorf("condition %+v", l.Condition)
	}
	var reasons []string
	for _, e := range l.Events {
		reasons = append(reasons, e.Reason)
	}
	if got := strings.Join(reasons, ","); got != "NetworkSelectionWarning,Pulled,Scheduled" {
		t.Errorf("events in order %s", got)
	}
}

// TestExplainMarksEventsFromAnotherNode: an event of plexus's about the
// pod that names another node than the pod's is marked, and warned about.
func TestExplainMarksEventsFromAnotherNode(t *testing.T) {
	pod := testPod("team-a", "web", nil)
	ev := func(name, host string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "web", UID: types.UID(podUID)},
			Type:           "Warning", Reason: name, Message: "denied", LastTimestamp: metav1.Now(),
			Source: corev1.EventSource{Component: "plexusd", Host: host},
		}
	}
	fc := fakeCluster{pods: []*corev1.Pod{pod}, events: []*corev1.Event{ev("Own", "node-1"), ev("Forged", "node-2")}}
	r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t)})
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]string{}
	for _, e := range r.LastAdd.Events {
		other[e.Reason] = e.OtherNode
	}
	if other["Own"] != "" || other["Forged"] != "node-2" {
		t.Errorf("events' other nodes %v, want only Forged's node-2", other)
	}
	if w := strings.Join(r.Warnings, "\n"); !strings.Contains(w, "event Forged on the pod was reported by plexus on node node-2, not the pod's node node-1") {
		t.Errorf("warnings lack the forged event:\n%s", w)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Warning Forged (plexusd, ") || !strings.Contains(out.String(), "warning from node node-2, not the pod's: denied") {
		t.Errorf("text does not mark the forged event:\n%s", out.String())
	}
}

// TestExplainManifest: -f with --nad manifests and no cluster.
func TestExplainManifest(t *testing.T) {
	pod := writeFile(t, "pod.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: team-a
  annotations:
    k8s.v1.cni.cncf.io/networks: blue,team-a/gone
`)
	blue := writeFile(t, "blue.yaml", `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: blue, namespace: team-a}
spec:
  config: '`+bridgeConf+`'
`)
	r, err := Explain(t.Context(), Options{PodFile: pod, NADFiles: []string{blue}})
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, r, []string{"(team-a/gone): not found (s3.4)", "no kubeconfig"})
	if r.Pod.From != pod || r.Annotation.Format != "comma" || r.Attachments[0].NAD.From != blue || r.LastAdd.Events != nil {
		t.Errorf("report %+v", r)
	}
}

// TestExplainExtensions: keys map to the module owning their prefix.
func TestExplainExtensions(t *testing.T) {
	mod := filepath.Join(t.TempDir(), "vlan.wasm")
	if err := os.WriteFile(mod, declaredModule("vlan", "com.example."), 0o600); err != nil {
		t.Fatal(err)
	}
	ext := writeFile(t, "plugin.json", `{"extensions":{"modules":[{"path":"`+mod+`"}]}}`)
	fc := fakeCluster{
		pods: []*corev1.Pod{testPod("team-a", "web", networks(`[{"name":"blue","com.example.vlan":10,"org.other.x":1}]`))},
		nads: []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil)},
	}
	r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t), ExtensionsFile: ext})
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, r, nil)
	keys := r.Attachments[0].Keys
	if len(keys) != 2 || keys[0].Module != "vlan" || keys[0].Prefix != "com.example." || keys[1].Module != "" ||
		!strings.Contains(keys[1].Outcome, "ignored") {
		t.Errorf("keys %+v", keys)
	}
	if len(r.Extensions.Modules) != 1 || r.Extensions.UnownedKeys != "ignore" {
		t.Errorf("extensions %+v", r.Extensions)
	}
}

// declaredModule is the smallest module extensions.New accepts: a
// declaration without hooks, no code.
func declaredModule(name, prefix string) []byte {
	m := `{"abi":` + jsonInt(abi.Version) + `,"name":"` + name + `","version":"1","prefixes":["` + prefix + `"],"hooks":[]}`
	return wasmfmt.AppendCustomSection([]byte(wasmfmt.Header), abi.ManifestSection, []byte(m))
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestExplainNode: the plexus pod on the node and its readiness.
func TestExplainNode(t *testing.T) {
	ready := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: PlexusNamespace, Name: "plexus-abcde", Labels: map[string]string{"app.kubernetes.io/name": "plexus"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{RestartCount: 2}}},
	}
	elsewhere := ready.DeepCopy()
	elsewhere.Name, elsewhere.Spec.NodeName = "plexus-fghij", "node-2"
	elsewhere.Status.Conditions[0].Status = corev1.ConditionFalse
	fc := fakeCluster{pods: []*corev1.Pod{testPod("team-a", "web", nil), ready, elsewhere}}
	for _, tt := range []struct {
		node string
		want []string
	}{
		{"node-1", nil},
		{"node-2", []string{"plexus-fghij is not ready"}},
		{"node-3", []string{"node node-3: no plexus pod"}},
	} {
		r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t), Node: tt.node})
		if err != nil {
			t.Fatal(err)
		}
		checkProblems(t, r, tt.want)
		if len(r.Node.Unavailable) == 0 {
			t.Error("node report lists no unavailable checks")
		}
		if tt.node == "node-1" && (len(r.Node.Pods) != 1 || r.Node.Pods[0].Restarts != 2 || !r.Node.Pods[0].Ready) {
			t.Errorf("node pods %+v", r.Node.Pods)
		}
	}
}

// TestExplainPodNotFound is an error, not a report.
func TestExplainPodNotFound(t *testing.T) {
	_, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "nope", Cluster: fakeCluster{}.cluster(t)})
	if err == nil || !strings.Contains(err.Error(), "Pod team-a/nope: not found") {
		t.Fatalf("err = %v", err)
	}
}

// TestWriteText: sections, marked problems, the result line.
func TestWriteText(t *testing.T) {
	fc := fakeCluster{
		pods: []*corev1.Pod{testPod("team-a", "web", networks("blue,team-b/red,gone"))},
		nads: []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil), testNAD("team-b", "red", bridgeConf, nil)},
	}
	r, err := Explain(context.Background(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t), Policies: isolation(t)})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Pod team-a/web (uid " + podUID + ", node node-1), read from the cluster",
		"  [0] team-a/blue on net1 (generated)",
		"  [0] team-a/blue: found (cluster), config from spec.config is valid: plugins bridge, ipam host-local, cniVersion 1.0.0",
		"  [2] team-a/gone: PROBLEM not found (s3.4)",
		"  [1] team-b/red: PROBLEM denied: [namespace-isolation]",
		"  [2] team-a/gone: not asked: the network fails before the policy decides",
		"Result: 2 problem(s): the pod would not get every network it asks for",
		"  events: none",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// TestMissingNADSuggestsTheNearest: a missing NAD's problem lists the
// namespace's NADs and, for a likely typo, the nearest name, and says the
// annotation can be fixed in place.
func TestMissingNADSuggestsTheNearest(t *testing.T) {
	fc := fakeCluster{
		pods: []*corev1.Pod{testPod("team-a", "web", networks("blu,zzzzzz"))},
		nads: []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil), testNAD("team-a", "red", bridgeConf, nil), testNAD("team-b", "bleu", bridgeConf, nil)},
	}
	r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t)})
	if err != nil {
		t.Fatal(err)
	}
	problems := strings.Join(r.Problems, "\n")
	for _, want := range []string{
		`team-a/blu): not found (s3.4): NetworkAttachmentDefinition team-a/blu: not found; namespace team-a has blue, red; did you mean "blue"? Fixing the pod's annotation in place is enough`,
		`team-a/zzzzzz): not found (s3.4): NetworkAttachmentDefinition team-a/zzzzzz: not found; namespace team-a has blue, red:`,
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
}

func TestNearestNameIsALikelyTypoOnly(t *testing.T) {
	names := []string{"blue", "green", "macvlan-a"}
	for want, near := range map[string]string{"blu": "blue", "gren": "green", "macvlan-b": "macvlan-a", "red": "", "x": ""} {
		if got := nearest(want, names); got != near {
			t.Errorf("nearest(%q) = %q, want %q", want, got, near)
		}
	}
}

// TestRunningPodShowsTheLastAddFirst: for a running pod the last ADD's
// section comes first, and warnings from before the pod started are
// marked old.
func TestRunningPodShowsTheLastAddFirst(t *testing.T) {
	started := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	pod := testPod("team-a", "web", networks("blue"))
	pod.Status.Phase, pod.Status.StartTime = corev1.PodRunning, &metav1.Time{Time: started}
	ev := func(name string, at time.Time) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "team-a", Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "web", UID: types.UID(podUID)},
			Type:           corev1.EventTypeWarning, Reason: name, Message: "failed", LastTimestamp: metav1.NewTime(at),
			Source: corev1.EventSource{Component: "kubelet", Host: "node-1"},
		}
	}
	fc := fakeCluster{
		pods:   []*corev1.Pod{pod},
		nads:   []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil)},
		events: []*corev1.Event{ev("Before", started.Add(-time.Hour)), ev("After", started.Add(time.Minute))},
	}
	r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t)})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, e := range r.LastAdd.Events {
		old[e.Reason] = e.Old
	}
	if !old["Before"] || old["After"] {
		t.Errorf("old events %v, want Before only", old)
	}
	var out bytes.Buffer
	if err := WriteText(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if i, j := strings.Index(text, "Last ADD"), strings.Index(text, "Selection:"); i < 0 || j < 0 || i > j {
		t.Errorf("Last ADD at %d, Selection at %d: want the last ADD first for a running pod:\n%s", i, j, text)
	}
	if !strings.Contains(text, "Warning Before (kubelet, 2026-11-25T16:00:00Z) old: before the pod started: failed") ||
		!strings.Contains(text, "Running since 2026-11-25T17:00:00Z") {
		t.Errorf("text does not mark the old warning or the pod's start:\n%s", text)
	}
}
