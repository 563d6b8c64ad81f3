package kubeenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func deployFile(t *testing.T, name string) string { return DeployFile(t, name) }

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestControlPlane drives a real kube-apiserver through everything plexus'
// end-to-end tests rely on, including the deploy/ manifests' permissions, and
// checks that Stop leaves nothing behind.
func TestControlPlane(t *testing.T) {
	e := ForTest(t, Options{})
	ctx := t.Context()

	admin, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}

	// The -X ldflags reached the binary: clients see the release, not
	// v0.0.0-master.
	v, err := admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != "v1.36.3" || v.Major != "1" || v.Minor != "36" {
		t.Errorf("server version = %s (major %q minor %q), want v1.36.3 (1, 36)", v.GitVersion, v.Major, v.Minor)
	}

	const ns = "e2e"
	if err := e.CreateNamespace(ctx, ns, map[string]string{"plexus.test/tier": "gold"}); err != nil {
		t.Fatal(err)
	}

	t.Run("dry-run stores nothing", func(t *testing.T) {
		if err := e.Apply(ctx, true, deployFile(t, "base/crd.yaml"), deployFile(t, "base/rbac.yaml")); err != nil {
			t.Fatalf("dry-run apply: %v", err)
		}
		_, err := admin.RbacV1().ClusterRoles().Get(ctx, "plexus", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("ClusterRole plexus after dry-run apply: err = %v, want NotFound", err)
		}
	})

	if err := e.Apply(ctx, false, deployFile(t, "base/crd.yaml"), deployFile(t, "base/rbac.yaml"), deployFile(t, "base/admission.yaml")); err != nil {
		t.Fatalf("apply deploy manifests: %v", err)
	}

	// Two NADs in one multi-document file (with an empty document between
	// them): one with a config, one without spec at all (s3.2 makes it
	// optional).
	const config = `{"cniVersion":"1.0.0","type":"bridge","bridge":"br-e2e"}`
	tmp := t.TempDir()
	nads := writeFile(t, tmp, "nads.yaml", fmt.Sprintf(`
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: br
  namespace: %[1]s
spec:
  config: '%[2]s'
---
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: bare
  namespace: %[1]s
`, ns, config))
	countsBeforeApply, err := e.RequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(ctx, false, nads); err != nil {
		t.Fatalf("apply NADs: %v", err)
	}
	br, err := NADs(dyn).Namespace(ns).Get(ctx, "br", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NAD br: %v", err)
	}
	if got, _, _ := unstructuredString(br.Object, "spec", "config"); got != config {
		t.Errorf("NAD br spec.config = %q, want %q", got, config)
	}

	// The schema is strict: server-side apply refuses a field it does not
	// declare, and a lenient create stores the object without it.
	const typo = `
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: typo
  namespace: e2e
spec:
  config: '{}'
  confg: '{}'
`
	err = e.Apply(ctx, false, writeFile(t, tmp, "typo.yaml", typo))
	if err == nil || !strings.Contains(err.Error(), ".spec.confg") {
		t.Errorf("apply NAD with spec.confg: err = %v, want it refused naming .spec.confg", err)
	}
	typoObj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(typo), &typoObj.Object); err != nil {
		t.Fatal(err)
	}
	stored, err := NADs(dyn).Namespace(ns).Create(ctx, typoObj, metav1.CreateOptions{FieldValidation: "Ignore"})
	if err != nil {
		t.Fatalf("create NAD typo: %v", err)
	}
	if spec, _ := stored.Object["spec"].(map[string]any); len(spec) != 1 || spec["config"] != "{}" {
		t.Errorf("NAD typo spec = %v, want only config (unknown field pruned)", spec)
	}
	if _, err := NADs(dyn).Namespace(ns).Get(ctx, "bare", metav1.GetOptions{}); err != nil {
		t.Errorf("get NAD bare: %v", err)
	}
	// Two applied, one refused: all three were requests.
	countsAfterApply := waitCounts(t, e, countsBeforeApply, "APPLY network-attachment-definitions", 3)
	if d := countsAfterApply["APPLY network-attachment-definitions"] - countsBeforeApply["APPLY network-attachment-definitions"]; d != 3 {
		t.Errorf("APPLY network-attachment-definitions grew by %v, want 3", d)
	}
	if d := countsAfterApply["POST network-attachment-definitions"] - countsBeforeApply["POST network-attachment-definitions"]; d != 1 {
		t.Errorf("POST network-attachment-definitions grew by %v, want 1", d)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   "node-a", // no scheduler: bound at creation
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/pause"}},
		},
	}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	got, err := admin.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod: %v", err)
	}
	if got.Spec.NodeName != "node-a" || got.Spec.ServiceAccountName != "default" {
		t.Errorf("pod nodeName=%q serviceAccountName=%q, want node-a and default (ServiceAccount admission)",
			got.Spec.NodeName, got.Spec.ServiceAccountName)
	}

	saCfg, err := e.NodeServiceAccountConfig(ctx, "kube-system", "plexus", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	saDyn, err := dynamic.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("plexus may", func(t *testing.T) {
		if _, err := sa.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Errorf("get pod: %v", err)
		}
		if _, err := sa.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Errorf("get namespace: %v", err)
		}
		if _, err := NADs(saDyn).Namespace(ns).Get(ctx, "br", metav1.GetOptions{}); err != nil {
			t.Errorf("get NAD: %v", err)
		}
		if _, err := NADs(saDyn).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list NADs: %v", err)
		}
		// network-status goes through the status subresource, which keeps
		// metadata changes.
		patch := []byte(`{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`)
		if _, err := sa.CoreV1().Pods(ns).Patch(ctx, "p", types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("patch pod status: %v", err)
		}
		if p, err := admin.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil || p.Annotations["k8s.v1.cni.cncf.io/network-status"] != "[]" {
			t.Errorf("network-status patched through pods/status did not stick: %v %v", p.Annotations, err)
		}
		ref := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", UID: got.UID, APIVersion: "v1"}
		if _, err := sa.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "p-", Namespace: ns},
			InvolvedObject: ref, Type: corev1.EventTypeWarning, Reason: "E2E", Message: "core event",
			Source: corev1.EventSource{Component: "plexus", Host: "node-a"}, // its credential's node (plexus-event-writes)
		}, metav1.CreateOptions{}); err != nil {
			t.Errorf("create core/v1 event: %v", err)
		}
		if _, err := sa.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: ns},
			EventTime:  metav1.NowMicro(), Regarding: ref, Type: corev1.EventTypeWarning, Reason: "E2E",
			Action: "Attach", Note: "events.k8s.io event", ReportingController: "plexus.test/e2e", ReportingInstance: "node-a",
		}, metav1.CreateOptions{}); err != nil {
			t.Errorf("create events.k8s.io/v1 event: %v", err)
		}
	})

	t.Run("plexus may not", func(t *testing.T) {
		forbidden := func(what string, err error) {
			t.Helper()
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: err = %v, want Forbidden", what, err)
			}
		}
		forbidden("delete pod", sa.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}))
		// The pod's spec: a node's plexus credential must not be able to
		// swap a container's image.
		image := []byte(`{"spec":{"containers":[{"name":"c","image":"attacker.example/evil"}]}}`)
		_, err := sa.CoreV1().Pods(ns).Patch(ctx, "p", types.StrategicMergePatchType, image, metav1.PatchOptions{})
		forbidden("patch pod spec", err)
		_, err = sa.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		forbidden("list secrets", err)
		_, err = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		forbidden("list secrets in namespace", err)
		_, err = sa.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		forbidden("create pod", err)
		forbidden("delete NAD", NADs(saDyn).Namespace(ns).Delete(ctx, "br", metav1.DeleteOptions{}))
		// The pod survived the attempted delete.
		if _, err := admin.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil {
			t.Errorf("pod after forbidden delete: %v", err)
		}
	})

	// deploy/base/admission.yaml: through pods/status plexus may change its
	// annotation and its condition, and nothing else RBAC would let by.
	t.Run("plexus's pod writes are its annotation and condition", func(t *testing.T) {
		// The API server starts enforcing a new policy within a second or
		// so of its creation.
		other := []byte(`{"metadata":{"annotations":{"example.com/x":"y"}}}`)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			_, err := sa.CoreV1().Pods(ns).Patch(ctx, "p", types.StrategicMergePatchType, other, metav1.PatchOptions{}, "status")
			if apierrors.IsForbidden(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the admission policy is not enforced 20s after its creation: %v", err)
			}
			if err == nil {
				// Let through before the policy was on: put it back.
				undo := []byte(`{"metadata":{"annotations":{"example.com/x":null}}}`)
				if _, err := admin.CoreV1().Pods(ns).Patch(ctx, "p", types.StrategicMergePatchType, undo, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, tc := range []struct {
			name, patch string
			allowed     bool
		}{
			{"network-status", `{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[{\"name\":\"x\"}]"}}}`, true},
			{"plexus's condition", `{"status":{"conditions":[{"type":"plexus.io/NetworkAttachments","status":"True","reason":"Applied"}]}}`, true},
			{"another annotation", `{"metadata":{"annotations":{"example.com/x":"y"}}}`, false},
			{"a label (a Service's selector)", `{"metadata":{"labels":{"app":"hijack"}}}`, false},
			{"a finalizer", `{"metadata":{"finalizers":["example.com/block"]}}`, false},
			{"the pod IP (Service endpoints)", `{"status":{"podIP":"10.9.9.9","podIPs":[{"ip":"10.9.9.9"}]}}`, false},
			{"the phase", `{"status":{"phase":"Failed"}}`, false},
			{"readiness", `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`, false},
			{"generateName", `{"metadata":{"generateName":"hijack-"}}`, false},
			{"observedGeneration", `{"status":{"observedGeneration":99}}`, false},
		} {
			_, err := sa.CoreV1().Pods(ns).Patch(ctx, "p", types.StrategicMergePatchType, []byte(tc.patch), metav1.PatchOptions{}, "status")
			switch {
			case tc.allowed && err != nil:
				t.Errorf("%s: %v, want allowed", tc.name, err)
			case !tc.allowed && !apierrors.IsForbidden(err):
				t.Errorf("%s: err = %v, want Forbidden by the admission policy", tc.name, err)
			case !tc.allowed && !strings.Contains(err.Error(), "plexus-pod-writes"):
				t.Errorf("%s: %v, want the policy named", tc.name, err)
			}
		}
		// The policy binds plexus's identity only.
		label := []byte(`{"metadata":{"labels":{"plexus.test/admin":"yes"}}}`)
		if _, err := admin.CoreV1().Pods(ns).Patch(ctx, "p", types.StrategicMergePatchType, label, metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("an admin's label through pods/status: %v", err)
		}
	})

	// deploy/base/admission.yaml: a credential bound to one node writes the
	// pods of that node only; one bound to nothing writes none.
	t.Run("plexus's pod writes stay on its node", func(t *testing.T) {
		patch := []byte(`{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[{\"name\":\"forged\"}]"}}}`)
		nodeB, err := e.NodeServiceAccountConfig(ctx, "kube-system", "plexus", "node-b")
		if err != nil {
			t.Fatal(err)
		}
		unbound, err := e.ServiceAccountConfig(ctx, "kube-system", "plexus")
		if err != nil {
			t.Fatal(err)
		}
		for name, cfg := range map[string]*rest.Config{"node-b's credential": nodeB, "a credential bound to no node": unbound} {
			c, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.CoreV1().Pods(ns).Patch(ctx, "p", types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "plexus-pod-writes") || !strings.Contains(err.Error(), "node its credential is bound to") {
				t.Errorf("%s patching node-a's pod: err = %v, want Forbidden by plexus-pod-writes", name, err)
			}
		}
		if p, err := admin.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil || strings.Contains(p.Annotations["k8s.v1.cni.cncf.io/network-status"], "forged") {
			t.Errorf("a forged network-status stuck: %v %v", p.Annotations, err)
		}
	})

	// deploy/base/admission.yaml: the tokens plexus may mint of itself are
	// bound to its own node, short-lived and for the API server.
	t.Run("plexus's tokens are bound to its node", func(t *testing.T) {
		day, twoDays := int64(86400), int64(2*86400)
		nodeA, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound := func(node string) *authenticationv1.BoundObjectReference {
			return &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node}
		}
		mint := func(spec authenticationv1.TokenRequestSpec) error {
			_, err := sa.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "plexus", &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
			return err
		}
		// The API server starts enforcing a new policy within a second or so.
		for deadline := time.Now().Add(20 * time.Second); !apierrors.IsForbidden(mint(authenticationv1.TokenRequestSpec{})); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("plexus-tokens is not enforced 20s after its creation")
			}
		}
		for _, tc := range []struct {
			name    string
			spec    authenticationv1.TokenRequestSpec
			allowed bool
		}{
			{"bound to its node for a day", authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-a", UID: nodeA.UID}, ExpirationSeconds: &day}, true},
			{"bound to its node, default lifetime", authenticationv1.TokenRequestSpec{BoundObjectRef: bound("node-a")}, true},
			{"bound to nothing", authenticationv1.TokenRequestSpec{}, false},
			{"bound to another node", authenticationv1.TokenRequestSpec{BoundObjectRef: bound("node-b")}, false},
			{"living two days", authenticationv1.TokenRequestSpec{BoundObjectRef: bound("node-a"), ExpirationSeconds: &twoDays}, false},
		} {
			err := mint(tc.spec)
			switch {
			case tc.allowed && err != nil:
				t.Errorf("%s: %v, want allowed", tc.name, err)
			case !tc.allowed && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "plexus-tokens")):
				t.Errorf("%s: err = %v, want Forbidden by plexus-tokens", tc.name, err)
			}
		}
	})

	// Every verb on every resource plexus could plausibly touch: a grant
	// missing from deploy/base/rbac.yaml or one too many fails here.
	t.Run("exact permissions", func(t *testing.T) {
		// Many reviews in a row: lift client-side throttling.
		fast := rest.CopyConfig(saCfg)
		fast.QPS, fast.Burst = 500, 1000
		sa, err := kubernetes.NewForConfig(fast)
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[string]bool{
			"/pods/get": true, "/pods/list": true, "/pods/watch": true,
			// network-status, and plexusd's dynamic attachments' condition;
			// never a write to the pod itself (its spec).
			"/pods/status/patch": true,
			"/namespaces/get":    true,
			"k8s.cni.cncf.io/network-attachment-definitions/get":   true,
			"k8s.cni.cncf.io/network-attachment-definitions/list":  true,
			"k8s.cni.cncf.io/network-attachment-definitions/watch": true,
			"/events/create": true, "/events/patch": true,
			"events.k8s.io/events/create": true, "events.k8s.io/events/patch": true,
			"resource.k8s.io/resourceclaims/get": true,
			// The AttachmentPolicy a node follows, read only; its own
			// PlexusNode by server-side apply (admission narrows it to
			// the credential's node).
			"plexus.io/attachmentpolicies/get": true, "plexus.io/attachmentpolicies/list": true, "plexus.io/attachmentpolicies/watch": true,
			"plexus.io/plexusnodes/create":       true,
			"plexus.io/plexusnodes/patch":        true,
			"plexus.io/plexusnodes/status/patch": true,
		}
		resources := []struct{ group, resource, subresource string }{
			{"", "pods", ""}, {"", "pods", "status"}, {"", "pods", "binding"}, {"", "pods", "exec"},
			{"", "namespaces", ""}, {"", "events", ""}, {"events.k8s.io", "events", ""},
			{"k8s.cni.cncf.io", "network-attachment-definitions", ""},
			{"resource.k8s.io", "resourceclaims", ""}, {"resource.k8s.io", "resourceclaims", "status"},
			{"", "secrets", ""}, {"", "configmaps", ""}, {"", "nodes", ""}, {"", "serviceaccounts", "token"},
			{"plexus.io", "attachmentpolicies", ""}, {"plexus.io", "attachmentpolicies", "status"},
			{"plexus.io", "plexusnodes", ""}, {"plexus.io", "plexusnodes", "status"},
		}
		clusterScoped := map[string]bool{"namespaces": true, "nodes": true, "attachmentpolicies": true, "plexusnodes": true}
		verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
		for _, r := range resources {
			for _, verb := range verbs {
				for _, namespace := range []string{ns, ""} {
					if clusterScoped[r.resource] && namespace != "" {
						continue
					}
					ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
						ResourceAttributes: &authorizationv1.ResourceAttributes{
							Namespace: namespace, Verb: verb, Group: r.group, Resource: r.resource, Subresource: r.subresource,
						},
					}}
					res, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
					if err != nil {
						t.Fatalf("access review: %v", err)
					}
					key := r.group + "/" + r.resource + "/" + verb
					if r.subresource != "" {
						key = r.group + "/" + r.resource + "/" + r.subresource + "/" + verb
					}
					if res.Status.Allowed != allowed[key] {
						t.Errorf("%s in namespace %q: allowed=%v, want %v", key, namespace, res.Status.Allowed, allowed[key])
					}
				}
			}
		}
		// The installer's one namespaced grant (Role plexus-token): tokens
		// of its own ServiceAccount, in kube-system, and no other.
		for _, tc := range []struct {
			namespace, name string
			want            bool
		}{
			{"kube-system", "plexus", true},
			{"kube-system", "default", false},
			{"kube-system", "", false},
			{ns, "plexus", false},
		} {
			for _, verb := range verbs {
				ssar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: tc.namespace, Verb: verb, Resource: "serviceaccounts", Subresource: "token", Name: tc.name,
					},
				}}
				res, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, ssar, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("access review: %v", err)
				}
				if want := tc.want && verb == "create"; res.Status.Allowed != want {
					t.Errorf("serviceaccounts/token %s %s/%q: allowed=%v, want %v", verb, tc.namespace, tc.name, res.Status.Allowed, want)
				}
			}
		}
	})

	t.Run("request counts", func(t *testing.T) {
		before, err := e.RequestCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := sa.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		after := waitCounts(t, e, before, "GET pods", 3)
		if d := after["GET pods"] - before["GET pods"]; d != 3 {
			t.Errorf("GET pods grew by %v, want 3 (keys: %v)", d, keysWith(after, "pods"))
		}
		if d := after["DELETE pods"] - before["DELETE pods"]; d != 0 {
			t.Errorf("DELETE pods grew by %v, want 0", d)
		}
	})

	t.Run("kubeconfig", func(t *testing.T) {
		dir := t.TempDir()
		clients := map[string]*kubernetes.Clientset{}
		for name, cfg := range map[string]*rest.Config{"admin": e.AdminConfig(), "sa": saCfg} {
			path := filepath.Join(dir, name)
			if err := e.Kubeconfig(path, cfg); err != nil {
				t.Fatal(err)
			}
			loaded, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatalf("load %s kubeconfig: %v", name, err)
			}
			if clients[name], err = kubernetes.NewForConfig(loaded); err != nil {
				t.Fatal(err)
			}
			if _, err := clients[name].CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil {
				t.Errorf("get pod through %s kubeconfig: %v", name, err)
			}
		}
		// The admin file really is admin, the ServiceAccount file is not.
		if _, err := clients["admin"].CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list secrets through admin kubeconfig: %v", err)
		}
		if _, err := clients["sa"].CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("list secrets through sa kubeconfig: err = %v, want Forbidden", err)
		}
	})

	// Stop, then check that nothing is left: processes, ports, files.
	pids := []int{e.etcd.cmd.Process.Pid, e.apiserver.cmd.Process.Pid}
	ports := []int{e.etcdPorts[0], e.etcdPorts[1], e.apiserverPort}
	dir := e.Dir()
	if err := e.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d after Stop: kill(0) = %v, want ESRCH", pid, err)
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d after Stop: kill(0) = %v, want ESRCH", pid, err)
		}
	}
	for _, port := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Errorf("port %d after Stop: %v", port, err)
			continue
		}
		l.Close()
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch directory %s after Stop: stat = %v, want not exist", dir, err)
	}
}

// waitCounts scrapes until key has grown by at least want since before: the
// server counts a request as it finishes, which can be just after the client
// has its response. The exact growth is for the caller to check.
func waitCounts(t *testing.T, e *Env, before map[string]float64, key string, want float64) map[string]float64 {
	t.Helper()
	// Bounds a wait for something that should never be missing, it is not
	// a measurement.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		after, err := e.RequestCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after[key]-before[key] >= want {
			return after
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s grew by %v, never reached %v (keys: %v)", key, after[key]-before[key], want, keysWith(after, strings.Fields(key)[1]))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

func keysWith(m map[string]float64, sub string) []string {
	var out []string
	for k := range m {
		if strings.Contains(k, sub) {
			out = append(out, k)
		}
	}
	return out
}

// TestStartFailureReportsLogs needs no real binaries: a stand-in etcd that
// dies at once must make Start fail with its last log lines and leave no
// scratch directory behind.
// TestAdmissionPolicyComparesEveryPodField: plexus-pod-writes lets plexus
// change the network-status annotation and its own condition, and compares
// every other field of a pod's metadata and status by name. A field a newer
// Kubernetes API adds must be listed before it can be changed unchecked.
func TestAdmissionPolicyComparesEveryPodField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "admission.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := string(b)
	for _, tc := range []struct {
		typ    reflect.Type
		prefix string
		exempt map[string]bool
	}{
		{reflect.TypeOf(metav1.ObjectMeta{}), "variables.new", map[string]bool{"annotations": true, "resourceVersion": true, "managedFields": true}},
		{reflect.TypeOf(corev1.PodStatus{}), "variables.newStatus", map[string]bool{"conditions": true}},
	} {
		for i := range tc.typ.NumField() {
			name, _, _ := strings.Cut(tc.typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" || tc.exempt[name] {
				continue
			}
			if want := tc.prefix + ".?" + name + " == "; !strings.Contains(policy, want) {
				t.Errorf("deploy/base/admission.yaml does not compare %s.%s (%q)", tc.typ.Name(), name, want)
			}
		}
	}
}

func TestStartFailureReportsLogs(t *testing.T) {
	bin := t.TempDir()
	writeFile(t, bin, "etcd", "#!/bin/sh\necho 'stand-in etcd: refusing to start' >&2\nexit 3\n")
	writeFile(t, bin, "kube-apiserver", "#!/bin/sh\nexit 1\n")
	for _, f := range []string{"etcd", "kube-apiserver"} {
		if err := os.Chmod(filepath.Join(bin, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	scratch := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	e, err := Start(ctx, Options{BinDir: bin, Dir: scratch})
	if err == nil {
		e.Stop()
		t.Fatal("Start succeeded with an etcd that exits")
	}
	if !strings.Contains(err.Error(), "stand-in etcd: refusing to start") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Start error does not carry the etcd log tail and exit status:\n%v", err)
	}
	left, err := os.ReadDir(scratch)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("scratch directory holds %d entries after failed Start, want 0", len(left))
	}
}

func TestStartMissingBinary(t *testing.T) {
	_, err := Start(t.Context(), Options{BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make k8s-bins") {
		t.Errorf("Start with empty BinDir: err = %v, want one pointing at make k8s-bins", err)
	}
}
