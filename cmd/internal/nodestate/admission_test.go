package nodestate_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestPlexusObjectWrites: deploy/base's RBAC and admission let a node's
// plexus credential write its own PlexusNode (through nodestate's
// Reporter, as plexusd does) and nothing of another node's, and no
// AttachmentPolicy at all; a credential bound to no node writes neither.
func TestPlexusObjectWrites(t *testing.T) {
	e := kubeenv.ForTest(t, kubeenv.Options{})
	ctx := t.Context()
	if err := e.Apply(ctx, false, kubeenv.DeployFile(t, "base/plexus-crds.yaml"), kubeenv.DeployFile(t, "base/rbac.yaml"), kubeenv.DeployFile(t, "base/admission.yaml")); err != nil {
		t.Fatal(err)
	}
	admin, err := dynamic.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	adminTyped, err := versioned.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]dynamic.Interface{}
	typed := map[string]versioned.Interface{}
	for name, cfg := range map[string]func() (*rest.Config, error){
		"node-a": func() (*rest.Config, error) {
			return e.NodeServiceAccountConfig(ctx, "kube-system", "plexus", "node-a")
		},
		"node-b": func() (*rest.Config, error) {
			return e.NodeServiceAccountConfig(ctx, "kube-system", "plexus", "node-b")
		},
		"unbound": func() (*rest.Config, error) { return e.ServiceAccountConfig(ctx, "kube-system", "plexus") },
	} {
		cfg, err := cfg()
		if err != nil {
			t.Fatal(err)
		}
		if creds[name], err = dynamic.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		if typed[name], err = versioned.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
	}
	waitEnforced(t, admin, creds["node-b"])

	t.Run("PlexusNode", func(t *testing.T) {
		install := nodestate.Install{ConfigInstalled: true, ConfigPath: "/etc/cni/net.d/00-plexus.conflist",
			DefaultNetwork: "pod-net", DefaultNetworkFile: "/etc/cni/net.d/10-default.conflist", Plugins: []string{"no-such-plugin"}}
		report := func(cred, node string) error {
			r, err := nodestate.New(nodestate.Options{Client: typed[cred], Node: node, FieldManager: nodestate.ManagerPlexusd,
				Mode: nodestate.ModeThick, Version: "test", Install: func() nodestate.Install { return install }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.PublishIfChanged(ctx)
			return err
		}
		// Its own, created by the first write, then changed.
		if err := report("node-a", "node-a"); err != nil {
			t.Fatalf("node-a's credential writing PlexusNode node-a: %v", err)
		}
		install.DefaultNetwork = "pod-net-2"
		if err := report("node-a", "node-a"); err != nil {
			t.Fatalf("node-a's credential updating PlexusNode node-a: %v", err)
		}
		got, err := adminTyped.PlexusV1alpha1().PlexusNodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := got.Status
		if !st.ConfigInstalled || st.DefaultNetwork != "pod-net-2" || st.Mode != "thick" || st.Updated.IsZero() ||
			!reflect.DeepEqual(st.MissingPlugins, []string{"no-such-plugin"}) {
			t.Errorf("PlexusNode node-a status %+v", st)
		}
		for _, tc := range []struct{ cred, node string }{
			{"node-a", "node-b"},  // another node's, new
			{"node-b", "node-a"},  // another node's, existing
			{"unbound", "node-a"}, // bound to no node
		} {
			err := report(tc.cred, tc.node)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "plexus-node-writes") {
				t.Errorf("%s's credential writing PlexusNode %s: err = %v, want Forbidden by plexus-node-writes", tc.cred, tc.node, err)
			}
		}
		if _, err := admin.Resource(plexusapi.PlexusNodes).Get(ctx, "node-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("PlexusNode node-b after forbidden writes: err = %v, want NotFound", err)
		}
	})

	t.Run("Events", func(t *testing.T) { testEventWrites(t, creds) })
	t.Run("RulesAsStored", func(t *testing.T) { testRulesAsStored(t, admin) })

	t.Run("AttachmentPolicy", func(t *testing.T) {
		pol := &plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team"},
			Spec: plexusapi.AttachmentPolicySpec{Modules: map[string]string{"team.rego": "package plexus.team\n"}}}
		if _, err := adminTyped.PlexusV1alpha1().AttachmentPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Nodes only read the object: what they enforce goes to their
		// PlexusNode, so no node's write reaches the others watching it.
		api := typed["node-a"].PlexusV1alpha1().AttachmentPolicies()
		got, err := api.Get(ctx, "team", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node-a reading the AttachmentPolicy: %v", err)
		}
		got.Spec.OnDelete = plexusapi.OnDeleteAllowAll
		if _, err := api.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a updating the AttachmentPolicy: err = %v, want Forbidden", err)
		}
		_, err = creds["node-a"].Resource(plexusapi.AttachmentPolicies).Patch(ctx, "team", types.MergePatchType,
			[]byte(`{"status":{"nodes":[{"node":"node-a"}]}}`), metav1.PatchOptions{}, "status")
		if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
			t.Errorf("node-a patching the AttachmentPolicy's status: err = %v, want Forbidden or NotFound", err)
		}
	})
}

// testRulesAsStored: the admission policies' resourceRules are stored as
// deploy/base writes them, with nothing defaulted in: kubectl apply
// replaces a list that differs from the live one, so a defaulted field
// would show every policy as "configured" on every apply (GitOps drift).
func testRulesAsStored(t *testing.T, admin dynamic.Interface) {
	raw, err := os.ReadFile(kubeenv.DeployFile(t, "base/admission.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vaps := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	n := 0
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var want map[string]any
		if err := yaml.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if want["kind"] != "ValidatingAdmissionPolicy" {
			continue
		}
		n++
		name, _, _ := unstructured.NestedString(want, "metadata", "name")
		live, err := admin.Resource(vaps).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantRules, _, _ := unstructured.NestedSlice(want, "spec", "matchConstraints", "resourceRules")
		gotRules, _, _ := unstructured.NestedSlice(live.Object, "spec", "matchConstraints", "resourceRules")
		if !reflect.DeepEqual(gotRules, wantRules) {
			t.Errorf("%s: resourceRules stored as %v, written as %v", name, gotRules, wantRules)
		}
	}
	if n == 0 {
		t.Fatal("no ValidatingAdmissionPolicy in deploy/base/admission.yaml")
	}
}

// eventsOf are the two APIs an Event is written through.
var (
	coreEvents = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	newEvents  = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
)

// createEvent creates an event about pod default/web that names host as
// its source, through the core or the events.k8s.io API.
func createEvent(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, host string) error {
	obj := map[string]any{
		"metadata": map[string]any{"generateName": "web-", "namespace": "default"},
		"reason":   "AttachmentFailed",
		"type":     "Warning",
	}
	ref := map[string]any{"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web"}
	if gvr == newEvents {
		// events.k8s.io/v1 has no source: the reporting instance names it.
		obj["apiVersion"], obj["kind"] = "events.k8s.io/v1", "Event"
		obj["regarding"], obj["note"], obj["action"] = ref, "forged?", "Attach"
		obj["eventTime"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
		obj["reportingController"], obj["reportingInstance"] = "plexus.io/plexus", host
	} else {
		obj["apiVersion"], obj["kind"] = "v1", "Event"
		obj["involvedObject"], obj["message"] = ref, "forged?"
		obj["source"] = map[string]any{"component": "plexus", "host": host}
	}
	_, err := c.Resource(gvr).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}

// testEventWrites: a node's credential writes events naming its own node
// as their source, through either API, and none naming another node.
func testEventWrites(t *testing.T, creds map[string]dynamic.Interface) {
	ctx := t.Context()
	for _, gvr := range []schema.GroupVersionResource{coreEvents, newEvents} {
		// The policy is enforced a moment after its creation.
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := createEvent(ctx, creds["node-a"], gvr, "node-b")
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "plexus-event-writes") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: node-a's credential writing an event from node-b: %v, want Forbidden by plexus-event-writes", gvr.Group+"/events", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := createEvent(ctx, creds["node-a"], gvr, "node-a"); err != nil {
			t.Errorf("%s: node-a's credential writing an event from node-a: %v", gvr.Group+"/events", err)
		}
		if err := createEvent(ctx, creds["unbound"], gvr, "node-a"); !apierrors.IsForbidden(err) {
			t.Errorf("%s: a credential bound to no node writing an event: %v, want Forbidden", gvr.Group+"/events", err)
		}
	}
}

// waitEnforced waits until the API server enforces plexus-node-writes
// (it starts within a second or so of the policy's creation): a write let
// through before is undone.
func waitEnforced(t *testing.T, admin, other dynamic.Interface) {
	t.Helper()
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion(plexusapi.Group + "/" + plexusapi.Version)
	probe.SetKind(plexusapi.KindPlexusNode)
	probe.SetName("probe")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := other.Resource(plexusapi.PlexusNodes).Apply(t.Context(), "probe", probe, metav1.ApplyOptions{FieldManager: "probe"})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "plexus-node-writes") {
			return
		}
		if err == nil {
			if err := admin.Resource(plexusapi.PlexusNodes).Delete(t.Context(), "probe", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plexus-node-writes is not enforced 20s after its creation: %v", err)
		}
	}
}
