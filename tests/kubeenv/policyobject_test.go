package kubeenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
)

// strictIsolation is the baseline with namespace isolation tightened:
// pods use networks of their own namespace only, "default" included.
func strictIsolation(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "policies", "baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "global_namespaces: [default]", "global_namespaces: []", 1)
	if edited == string(b) {
		t.Fatal("baseline.yaml no longer sets global_namespaces: [default]")
	}
	return edited
}

// isolationTest is a bundle test the strict policy passes.
const isolationTest = `package admin_test

import data.plexus.authz

test_default_network_denied_to_other_namespaces if {
	not authz.decision.allowed with input as {
		"version": "plexus.policy/v1",
		"pod": {"namespace": "team-a", "name": "web", "labels": {}, "annotations": {}},
		"namespace": {"name": "team-a"},
		"nad": {"namespace": "default", "name": "shared", "annotations": {}, "labels": {}},
		"selection": {"namespace": "default", "name": "shared"},
		"selections": [],
		"origin": "selection",
		"default": false,
	}
}
`

// TestPolicyObjectOnANode runs plexusd, with the deploy/ RBAC and a token
// bound to its node, against a real API server, and an admin pushing
// revisions of the AttachmentPolicy with plexusctl: each good revision
// becomes active on the node and shows in its PlexusNode; a broken one
// never replaces it, and says why there and in an Event; deletion
// follows onDelete; the CRD refuses a bad file name.
func TestPolicyObjectOnANode(t *testing.T) {
	e := ForTest(t, Options{})
	ctx := t.Context()
	ctl := buildPlexusctl(t)
	if err := e.Apply(ctx, false, deployFile(t, "base/crd.yaml"), deployFile(t, "base/plexus-crds.yaml"), deployFile(t, "base/rbac.yaml"), deployFile(t, "base/admission.yaml")); err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	px, err := versioned.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	adminKubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := e.Kubeconfig(adminKubeconfig, e.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	startPlexusd(t, e, dir, stateDir)
	waitFor(t, "plexusd's default policy", func() bool { return activeTarget(stateDir) == "defaults" })

	bundle := filepath.Join(dir, "bundle")
	if err := os.Mkdir(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, bundle, "baseline.yaml", strictIsolation(t))
	writeFile(t, bundle, "admin_test.rego", isolationTest)

	before, err := e.RequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var good string
	t.Run("a pushed revision becomes active and is reported", func(t *testing.T) {
		start := time.Now()
		out, code := runCtl(t, ctl, "policy", "push", "--kubeconfig", adminKubeconfig, bundle)
		if code != 0 {
			t.Fatalf("policy push: exit %d\n%s", code, out)
		}
		pushed := time.Now()
		good = pushedRevision(t, out)
		entry := waitEntry(t, px, func(n plexusapi.NodePolicy) bool { return n.Revision == good })
		t.Logf("plexusctl policy push (local tests, create): %s; object created to node-a's PlexusNode showing revision %s active: %s",
			pushed.Sub(start).Round(time.Millisecond), good, time.Since(pushed).Round(time.Millisecond))
		if entry.Error != "" || entry.TestsPassed != 1 || entry.Generation != 1 || entry.ObservedGeneration != 1 {
			t.Errorf("entry %+v: want generation 1 active, its 1 test passed, no error", entry)
		}
		if got := activeTarget(stateDir); got != good {
			t.Errorf("active link points at %q, want %s", got, good)
		}
		if !eventWith(t, admin, plexusapi.KindPlexusNode, "PolicyActivated", good) {
			t.Error("no PolicyActivated event naming the revision")
		}
		out, code = runCtl(t, ctl, "policy", "status", "--kubeconfig", adminKubeconfig)
		if code != 0 || !strings.Contains(out, "1 nodes follow it: 1 enforce generation 1") || !strings.Contains(out, good+"  1") {
			t.Errorf("policy status: exit %d\n%s", code, out)
		}
	})
	after, err := e.RequestCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("API requests for one activation (node side: PlexusNode status apply; admin side: push's get and create, status's list): %v", policyRequests(before, after))
	for k, v := range after {
		nodeWrite := strings.HasPrefix(k, "APPLY ") || strings.HasPrefix(k, "PATCH ") || strings.HasSuffix(k, " status")
		if strings.Contains(k, "attachmentpolicies") && nodeWrite && v != before[k] {
			t.Errorf("%s: %v requests: a node wrote to the AttachmentPolicy every node watches", k, v-before[k])
		}
	}

	t.Run("a broken revision never replaces the active one", func(t *testing.T) {
		u, err := dyn.Resource(plexusapi.AttachmentPolicies).Get(ctx, "cluster", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, "package admin\n\nallow if {", "spec", "modules", "broken.rego"); err != nil {
			t.Fatal(err)
		}
		if u, err = dyn.Resource(plexusapi.AttachmentPolicies).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		gen := u.GetGeneration()
		entry := waitEntry(t, px, func(n plexusapi.NodePolicy) bool { return n.ObservedGeneration == gen })
		if entry.Revision != good || !strings.Contains(entry.Error, "broken.rego") {
			t.Errorf("entry %+v: want revision %s still active and an error naming broken.rego", entry, good)
		}
		if got := activeTarget(stateDir); got != good {
			t.Errorf("active link points at %q, want %s", got, good)
		}
		if !eventWith(t, admin, plexusapi.KindPlexusNode, "PolicyRejected", "broken.rego") {
			t.Error("no PolicyRejected event naming the file")
		}
	})

	t.Run("push refuses a bundle whose tests fail", func(t *testing.T) {
		failing := filepath.Join(dir, "failing")
		if err := os.Mkdir(failing, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, failing, "baseline.yaml", strictIsolation(t))
		writeFile(t, failing, "admin_test.rego", strings.Replace(isolationTest, "not authz", "authz", 1))
		u, _ := dyn.Resource(plexusapi.AttachmentPolicies).Get(ctx, "cluster", metav1.GetOptions{})
		out, code := runCtl(t, ctl, "policy", "push", "--kubeconfig", adminKubeconfig, failing)
		if code == 0 || !strings.Contains(out, "tests failed") || !strings.Contains(out, "nothing pushed") {
			t.Fatalf("push of a failing bundle: exit %d\n%s", code, out)
		}
		u2, _ := dyn.Resource(plexusapi.AttachmentPolicies).Get(ctx, "cluster", metav1.GetOptions{})
		if u.GetGeneration() != u2.GetGeneration() {
			t.Errorf("generation %d -> %d: a refused push changed the object", u.GetGeneration(), u2.GetGeneration())
		}
	})

	t.Run("the CRD refuses a file name that is not one", func(t *testing.T) {
		bad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": plexusapi.Group + "/" + plexusapi.Version, "kind": plexusapi.KindAttachmentPolicy,
			"metadata": map[string]any{"name": "bad"},
			"spec":     map[string]any{"data": map[string]any{"../etc/x.yaml": "a: 1\n"}},
		}}
		_, err := dyn.Resource(plexusapi.AttachmentPolicies).Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "data names are file names") {
			t.Fatalf("create with a bad data name: %v, want the CRD's message", err)
		}
	})

	t.Run("deletion keeps the policy unless onDelete is AllowAll", func(t *testing.T) {
		out, code := runCtl(t, ctl, "policy", "push", "--kubeconfig", adminKubeconfig, "--on-delete", "AllowAll", bundle)
		if code != 0 {
			t.Fatalf("policy push: exit %d\n%s", code, out)
		}
		rev := pushedRevision(t, out)
		waitEntry(t, px, func(n plexusapi.NodePolicy) bool { return n.Revision == rev })
		if err := dyn.Resource(plexusapi.AttachmentPolicies).Delete(ctx, "cluster", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "no policy after deletion with AllowAll", func() bool { return activeTarget(stateDir) == "none" })
		// Pushed again with the default (Keep), deleted: the revision stays.
		out, code = runCtl(t, ctl, "policy", "push", "--kubeconfig", adminKubeconfig, bundle)
		if code != 0 {
			t.Fatalf("policy push: exit %d\n%s", code, out)
		}
		rev = pushedRevision(t, out)
		waitEntry(t, px, func(n plexusapi.NodePolicy) bool { return n.Revision == rev })
		absent := func() int {
			b, _ := os.ReadFile(filepath.Join(dir, "plexusd.log"))
			return strings.Count(string(b), `msg="policy object absent"`)
		}
		before := absent()
		if err := dyn.Resource(plexusapi.AttachmentPolicies).Delete(ctx, "cluster", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "plexusd to see the deletion", func() bool { return absent() > before })
		if got := activeTarget(stateDir); got != rev {
			t.Errorf("after deletion with Keep the active revision is %q, want %s", got, rev)
		}
	})
}

// startPlexusd runs plexusd, built from this tree, as node-a's ServiceAccount,
// following the AttachmentPolicy "cluster" with the image's library and
// the baseline as its default.
func startPlexusd(t *testing.T, e *Env, dir, stateDir string) {
	t.Helper()
	saCfg, err := e.NodeServiceAccountConfig(t.Context(), "kube-system", "plexus", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "plexusd.kubeconfig")
	if err := e.Kubeconfig(kubeconfig, saCfg); err != nil {
		t.Fatal(err)
	}
	library, err := filepath.Abs(filepath.Join("..", "..", "policies", "library"))
	if err != nil {
		t.Fatal(err)
	}
	baseline, err := filepath.Abs(filepath.Join("..", "..", "policies", "baseline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := json.Marshal(map[string]any{
		"kubeconfig": kubeconfig, "cacheDir": filepath.Join(dir, "cache"),
		"policy": policies.Config{Paths: []string{library}, Object: &policies.ObjectConfig{Name: "cluster", StateDir: stateDir, DefaultPaths: []string{baseline}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := writeFile(t, dir, "plexusd.json", string(conf))
	startProgram(t, filepath.Join(dir, "plexusd.log"), buildProgram(t, "plexusd"),
		"--config", cfgFile, "--socket", filepath.Join(dir, "plexusd.sock"), "--node-name", "node-a",
		"--max-parallel", "4", "--policy-poll", "1s", "--metrics-addr", "", "--install-config=false")
}

// activeTarget is the revision the state directory's active link names.
func activeTarget(stateDir string) string {
	target, err := os.Readlink(filepath.Join(stateDir, "active"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

var revisionLine = regexp.MustCompile(`AttachmentPolicy cluster: revision ([0-9]+-[0-9a-f]{12})`)

func pushedRevision(t *testing.T, out string) string {
	t.Helper()
	m := revisionLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("push printed no revision:\n%s", out)
	}
	return m[1]
}

// waitEntry waits until node-a's PlexusNode reports a policy that
// satisfies ok and returns it.
func waitEntry(t *testing.T, px versioned.Interface, ok func(plexusapi.NodePolicy) bool) plexusapi.NodePolicy {
	t.Helper()
	var last plexusapi.NodePolicy
	waitFor(t, "node-a's PlexusNode policy", func() bool {
		n, err := px.PlexusV1alpha1().PlexusNodes().Get(t.Context(), "node-a", metav1.GetOptions{})
		if err != nil || n.Status.Policy == nil {
			return false
		}
		last = *n.Status.Policy
		return ok(last)
	})
	return last
}

// waitFor polls cond; the bound is for something that should never be
// missing, not a measurement.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventWith reports an Event in "default" about a kind with reason and a
// message containing sub.
func eventWith(t *testing.T, cs kubernetes.Interface, kind, reason, sub string) bool {
	t.Helper()
	found := false
	waitFor(t, "event "+reason, func() bool {
		evs, err := cs.CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == kind && ev.Reason == reason && strings.Contains(ev.Message, sub) {
				found = true
			}
		}
		return found
	})
	return found
}

func policyRequests(before, after map[string]float64) string {
	var parts []string
	for k, v := range after {
		if strings.Contains(k, "attachmentpolicies") && v != before[k] {
			parts = append(parts, fmt.Sprintf("%s: %v", k, v-before[k]))
		}
	}
	return strings.Join(parts, ", ")
}
