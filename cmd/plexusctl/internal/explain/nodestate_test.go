package explain

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

func plexusNodeObj(name string, st plexusapi.PlexusNodeStatus) *plexusapi.PlexusNode {
	return &plexusapi.PlexusNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: st}
}

// TestExplainNodeState: what the node's PlexusNode says, checked against
// the pod's networks and the AttachmentPolicy it follows.
func TestExplainNodeState(t *testing.T) {
	started := time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)
	plexusPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: PlexusNamespace, Name: "plexusd-x", Labels: map[string]string{"app.kubernetes.io/name": "plexus"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "plexusd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}},
	}
	healthy := plexusapi.PlexusNodeStatus{Mode: "thick", Version: "v1", ConfigInstalled: true, ConfigPath: "/etc/cni/net.d/00-plexus.conflist",
		DefaultNetwork: "pod-net", DefaultNetworkFile: "/etc/cni/net.d/10-default.conflist", Updated: metav1.NewTime(started.Add(time.Minute)),
		Settings: &plexusapi.NodeSettings{ClusterNetwork: "/etc/cni/net.d/10-default.conflist", SystemNamespace: "kube-system", Compat: "multus", SystemNamespaces: []string{"kube-system"}},
		Policy:   &plexusapi.NodePolicy{Source: "object", Object: "team", Generation: 3, ObservedGeneration: 3, Revision: "3-0123456789ab", TestsPassed: 2}}
	with := func(f func(*plexusapi.PlexusNodeStatus)) plexusapi.PlexusNodeStatus {
		st := healthy
		f(&st)
		return st
	}
	policy := &plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team", Generation: 3}}
	for _, tc := range []struct {
		name             string
		state            *plexusapi.PlexusNodeStatus
		objectGeneration int64 // 0: the object is at generation 3
		problems         []string
		warnings         []string
		text             []string
	}{
		{name: "healthy", state: &healthy,
			text: []string{"PlexusNode node-1: thick mode, version v1", "config installed: /etc/cni/net.d/00-plexus.conflist", "default network: pod-net", "plugins: none missing", "policy: object team, revision 3-0123456789ab",
				"AttachmentPolicy team (generation 3): generation 3 active since", "2 test(s) passed"}},
		{name: "behind the object", state: &healthy, objectGeneration: 4,
			warnings: []string{"node node-1 has not yet acted on AttachmentPolicy team generation 4 (last tried 3)"}},
		{name: "missing", warnings: []string{"no PlexusNode node-1: plexus has not reported from this node"}, text: []string{"PlexusNode node-1: warning missing"}},
		{name: "stale", state: ptr(with(func(s *plexusapi.PlexusNodeStatus) { s.Updated = metav1.NewTime(started.Add(-time.Hour)) })),
			warnings: []string{"the running plexus does not report (an older version)"}},
		{name: "config not installed", state: ptr(with(func(s *plexusapi.PlexusNodeStatus) {
			s.ConfigInstalled, s.DefaultNetwork, s.DefaultNetworkFile = false, "", ""
		})),
			problems: []string{"node node-1: plexus's CNI config is not installed (/etc/cni/net.d/00-plexus.conflist): the default network's config was not found"}},
		{name: "plugin the NAD needs", state: ptr(with(func(s *plexusapi.PlexusNodeStatus) { s.MissingPlugins = []string{"host-local", "vlan"} })),
			problems: []string{"node node-1 lacks CNI plugin host-local in its bin dir, which [0] team-a/blue need(s)"},
			warnings: []string{"node node-1 lacks CNI plugin vlan"}, text: []string{"plugin host-local: PROBLEM missing, needed by [0] team-a/blue"}},
		{name: "policy refused", state: ptr(with(func(s *plexusapi.PlexusNodeStatus) {
			s.Policy = &plexusapi.NodePolicy{Source: "object", Object: "team", Generation: 2, ObservedGeneration: 3, Revision: "abc", Error: "team.rego:3: rego_parse_error"}
		})),
			warnings: []string{"node node-1: policy (object team): team.rego:3: rego_parse_error; revision abc stays in force"},
			text:     []string{"AttachmentPolicy team (generation 3): warning generation 3 refused: team.rego:3: rego_parse_error; revision abc stays in force"}},
		{name: "extension failed", state: ptr(with(func(s *plexusapi.PlexusNodeStatus) {
			s.Extensions = []plexusapi.NodeExtension{{Name: "vlan", Path: "/opt/plexus/ext/vlan.wasm", Error: "abi version 9: want 1"}}
		})), warnings: []string{"node node-1: extension vlan (/opt/plexus/ext/vlan.wasm) failed to load: abi version 9: want 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeCluster{
				pods: []*corev1.Pod{testPod("team-a", "web", networks("blue")), plexusPod},
				nads: []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil)},
			}
			if tc.state != nil {
				fc.plexus = append(fc.plexus, plexusNodeObj("node-1", *tc.state))
			}
			obj := policy.DeepCopy()
			if tc.objectGeneration != 0 {
				obj.Generation = tc.objectGeneration
			}
			fc.plexus = append(fc.plexus, obj)
			r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t), Node: "node-1"})
			if err != nil {
				t.Fatal(err)
			}
			checkProblems(t, r, tc.problems)
			warnings := strings.Join(r.Warnings, "\n")
			if len(tc.warnings) == 0 && strings.Contains(warnings, "node-1") {
				t.Errorf("warnings about the node, want none:\n%s", warnings)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(warnings, w) {
					t.Errorf("no warning mentions %q; warnings:\n%s", w, warnings)
				}
			}
			var out bytes.Buffer
			if err := WriteText(&out, r); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.text {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestExplainNodeKeepsADeletedObjectsRevision: with no AttachmentPolicy,
// explain decides with the baseline; a node whose PlexusNode says it still
// enforces a deleted object's revision (or allows everything) makes that a
// problem, so explain does not contradict the node; a node on the
// baseline does not.
func TestExplainNodeKeepsADeletedObjectsRevision(t *testing.T) {
	plexusPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: PlexusNamespace, Name: "plexusd-x", Labels: map[string]string{"app.kubernetes.io/name": "plexus"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, tc := range []struct {
		policy plexusapi.NodePolicy
		want   string // "": no such problem
	}{
		{plexusapi.NodePolicy{Source: "object", Object: "cluster", Revision: "3-0123456789ab"}, `node node-1 enforces revision 3-0123456789ab of AttachmentPolicy "cluster", which no longer exists`},
		{plexusapi.NodePolicy{Source: "none", Object: "cluster"}, "node node-1 allows every attachment"},
		{plexusapi.NodePolicy{Source: "files", Object: "cluster", Revision: "defaults"}, ""},
	} {
		t.Run(tc.policy.Source, func(t *testing.T) {
			st := plexusapi.PlexusNodeStatus{Mode: "thick", Version: "v1", ConfigInstalled: true, DefaultNetwork: "pod-net", Updated: metav1.Now(), Policy: &tc.policy}
			fc := fakeCluster{
				pods: []*corev1.Pod{testPod("team-a", "web", networks("blue")), plexusPod},
				nads: []*unstructured.Unstructured{testNAD("team-a", "blue", bridgeConf, nil)},
			}
			fc.plexus = append(fc.plexus, plexusNodeObj("node-1", st))
			r, err := Explain(t.Context(), Options{Namespace: "team-a", Name: "web", Cluster: fc.cluster(t), Node: "node-1", PolicyObject: "cluster"})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Policy.ObjectMissing {
				t.Fatalf("policy %+v: want the missing object noted", r.Policy)
			}
			problems := strings.Join(r.Problems, "\n")
			if tc.want == "" && strings.Contains(problems, "node-1") {
				t.Errorf("problems about the node, want none:\n%s", problems)
			}
			if tc.want != "" && (!strings.Contains(problems, tc.want) || r.OK) {
				t.Errorf("problems lack %q (ok %v):\n%s", tc.want, r.OK, problems)
			}
		})
	}
}
