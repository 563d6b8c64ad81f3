package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plexus-cni/plexus/tests/harness"
)

// testRotatedCredentials: thin mode reads the kubeconfig on every
// invocation, so the installer's rewrite after a token rotation takes
// effect on the next CNI call. The old token is invalidated by deleting
// and re-creating the ServiceAccount (bound tokens carry its UID).
func (s *suite) testRotatedCredentials(t *testing.T) {
	const sa = "plexus-rotated"
	s.serviceAccount(t, sa)
	// Bound to deploy/'s ClusterRole: the same permissions as plexus.
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "plexus"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: plexusNamespace}},
	}
	if _, err := s.admin.RbacV1().ClusterRoleBindings().Create(t.Context(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, ns := s.world(t)
	kubeconfig := filepath.Join(w.Dir, "rotated.kubeconfig")
	s.writeKubeconfig(t, kubeconfig, plexusNamespace, sa)
	w.Set("kubeconfig", kubeconfig)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	first := container(w, s.pod(t, ns, "first", `[{"name":"blue"}]`))
	second := container(w, s.pod(t, ns, "second", `[{"name":"blue"}]`))
	before := harness.HostVeths(t)
	w.Add(first)

	// Rotation: the old identity goes away.
	if err := s.admin.CoreV1().ServiceAccounts(plexusNamespace).Delete(t.Context(), sa, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.serviceAccount(t, sa)
	s.waitUnauthorized(t, kubeconfig)
	_, e := w.Plugin(second, "ADD")
	if e == nil || e.Code != 106 || !strings.Contains(e.Msg, "get pod "+ns+"/second") || !strings.Contains(e.Msg, "unauthorized") {
		t.Fatalf("ADD with the invalidated token: %+v, want CNI error 106 naming the call and Unauthorized", e)
	}
	w.AssertInterfaces(second, 0, "none after the refused ADD")
	w.MustPlugin(second, "DEL", "DEL after the refused ADD")

	// The installer rewrites the file with the new token; no restart of
	// anything, the next invocation reads it.
	s.writeKubeconfig(t, kubeconfig, plexusNamespace, sa)
	w.Add(second)
	if got := statusInterfaces(s.status(t, ns, "second")); len(got) != 2 {
		t.Errorf("network-status after rotation %v, want 2 entries", got)
	}
	w.Del(first)
	w.Del(second)
	w.AssertNoLeaks(before)
}

func (s *suite) serviceAccount(t *testing.T, name string) {
	t.Helper()
	obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plexusNamespace}}
	if _, err := s.admin.CoreV1().ServiceAccounts(plexusNamespace).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", plexusNamespace, name, err)
	}
}

// waitUnauthorized waits until the kubeconfig's token is refused:
// kube-apiserver caches successful token authentications for 10s, so a
// deleted ServiceAccount's token keeps working that long.
func (s *suite) waitUnauthorized(t *testing.T, kubeconfig string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	harness.Must(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	harness.Must(t, err)
	// Bounds a wait for something that must happen; not a measurement.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		_, err := cs.CoreV1().Namespaces().Get(ctx, plexusNamespace, metav1.GetOptions{})
		if apierrors.IsUnauthorized(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the deleted ServiceAccount's token is still accepted (last: %v)", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
