package faults

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// kube is a control plane with deploy/'s CRD and RBAC, and a World whose
// plexus reads it as the deploy/ ServiceAccount.
type kube struct {
	env   *kubeenv.Env
	admin kubernetes.Interface
	dyn   dynamic.Interface
	h     *harness.World
	ns    string
}

func newKube(t *testing.T) *kube {
	t.Helper()
	k := &kube{env: kubeenv.ForTest(t, kubeenv.Options{}), ns: "faults"}
	var err error
	k.admin, err = kubernetes.NewForConfig(k.env.AdminConfig())
	harness.Must(t, err)
	k.dyn, err = dynamic.NewForConfig(k.env.AdminConfig())
	harness.Must(t, err)
	deploy, err := filepath.Abs("../../deploy")
	harness.Must(t, err)
	harness.Must(t, k.env.Apply(t.Context(), false, filepath.Join(deploy, "base/crd.yaml"), filepath.Join(deploy, "base/rbac.yaml")))
	cfg, err := k.env.NodeServiceAccountConfig(t.Context(), "kube-system", "plexus", "node-a")
	harness.Must(t, err)
	kc := filepath.Join(t.TempDir(), "plexus.kubeconfig")
	harness.Must(t, k.env.Kubeconfig(kc, cfg))
	harness.Must(t, k.env.CreateNamespace(t.Context(), k.ns, nil))
	k.h = harness.New(t)
	k.h.Set("manifests", nil)
	k.h.Set("kubeconfig", kc)
	k.h.Set("apiTimeout", "500ms")
	k.h.Set("apiBudget", "2s")
	return k
}

func (k *kube) nad(t *testing.T, name, config string) {
	t.Helper()
	harness.Must(t, kubeenv.CreateNAD(t.Context(), k.dyn, k.ns, name, config))
}

// pod creates a pod and returns its sandbox, sending the real UID.
func (k *kube) pod(t *testing.T, name, networks string) *harness.Container {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": networks}},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/pause"}}},
	}
	created, err := k.admin.CoreV1().Pods(k.ns).Create(t.Context(), p, metav1.CreateOptions{})
	harness.Must(t, err)
	c := k.h.Container(k.ns, name)
	c.UID = string(created.UID)
	return c
}

// TestAPIServerStopsDuringAddAndDel: the control plane goes away while one
// pod's ADD is in a delegate (after the pod and NADs were read, before the
// status PATCH) and another pod's DEL is in a delegate. The ADD fails with
// code 107 once apiBudget is spent and undoes every attachment (s7.2); the
// DEL completes from the attachment record, which never needs the API.
func TestAPIServerStopsDuringAddAndDel(t *testing.T) {
	k := newKube(t)
	addFault, delFault := newFault(t, "block", "ok"), newFault(t, "ok", "block")
	k.nad(t, "plain", k.h.BridgeNADConfig("plain"))
	k.nad(t, "slowadd", conflist(k.h, "slowadd", addFault))
	k.nad(t, "slowdel", conflist(k.h, "slowdel", delFault))
	leaving := k.pod(t, "leaving", "plain,slowdel")
	arriving := k.pod(t, "arriving", "plain,slowadd")
	before := harness.HostVeths(t)
	k.h.MustPlugin(leaving, "ADD", "ADD of the pod to be deleted")

	add := k.h.StartPlugin(arriving, "ADD")
	del := k.h.StartPlugin(leaving, "DEL")
	addFault.waitFor(t, "ADD", 1)
	delFault.waitFor(t, "DEL", 1)
	if err := k.env.Stop(); err != nil {
		t.Fatalf("stop the control plane: %v", err)
	}
	addFault.release(t)
	delFault.release(t)

	_, e, err := add.Wait()
	harness.Must(t, err)
	assertCNIError(t, e, 107, "pod faults/arriving", "network-status")
	k.h.AssertInterfaces(arriving, 0, "none after the failed ADD")
	if _, e, err := del.Wait(); err != nil || e != nil {
		t.Fatalf("DEL while the control plane went away: %+v %v", e, err)
	}
	assertClean(t, k.h, leaving, before)
	k.h.MustPlugin(arriving, "DEL", "DEL after the failed ADD")
	assertClean(t, k.h, arriving, before)
}
