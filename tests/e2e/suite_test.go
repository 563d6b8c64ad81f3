package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

const (
	networksAnnotation = "k8s.v1.cni.cncf.io/networks"
	statusAnnotation   = "k8s.v1.cni.cncf.io/network-status"
	// plexusNamespace and plexusSA are the identity deploy/base/rbac.yaml grants.
	plexusNamespace = "kube-system"
	plexusSA        = "plexus"
)

// suite is one control plane with deploy/ applied, shared by the tests of
// a top-level test; each test gets its own namespace.
type suite struct {
	env   *kubeenv.Env
	admin kubernetes.Interface
	dyn   dynamic.Interface
	// kubeconfig authenticates as the plexus ServiceAccount.
	kubeconfig string
	nsSeq      atomic.Int32
}

// newSuite starts a control plane for t (failing, not skipping, under
// PLEXUS_E2E=1 when the binaries are missing), applies the CRD and RBAC of
// deploy/ and writes a kubeconfig for plexus's ServiceAccount.
func newSuite(t *testing.T) *suite {
	t.Helper()
	env := kubeenv.ForTest(t, kubeenv.Options{})
	s := &suite{env: env}
	var err error
	s.admin, err = kubernetes.NewForConfig(env.AdminConfig())
	harness.Must(t, err)
	s.dyn, err = dynamic.NewForConfig(env.AdminConfig())
	harness.Must(t, err)
	if err := env.Apply(t.Context(), false, deployFile(t, "base/crd.yaml"), deployFile(t, "base/rbac.yaml"), deployFile(t, "base/admission.yaml")); err != nil {
		t.Fatalf("apply deploy/base (CRD, RBAC, admission policy): %v", err)
	}
	s.kubeconfig = filepath.Join(t.TempDir(), "plexus.kubeconfig")
	s.writeKubeconfig(t, s.kubeconfig, plexusNamespace, plexusSA)
	return s
}

// writeKubeconfig writes a kubeconfig with a fresh token of the
// ServiceAccount, as the DaemonSet's installer does on a node.
func (s *suite) writeKubeconfig(t *testing.T, path, namespace, name string) {
	t.Helper()
	cfg, err := s.env.NodeServiceAccountConfig(t.Context(), namespace, name, "node-a")
	harness.Must(t, err)
	harness.Must(t, s.env.Kubeconfig(path, cfg))
}

func deployFile(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "deploy", name))
	harness.Must(t, err)
	return p
}

// world is a harness World switched to the Kubernetes source, in a fresh
// namespace of its own.
func (s *suite) world(t *testing.T) (*harness.World, string) {
	t.Helper()
	ns := fmt.Sprintf("e2e-%d", s.nsSeq.Add(1))
	harness.Must(t, s.env.CreateNamespace(t.Context(), ns, nil))
	w := harness.New(t)
	w.Set("manifests", nil)
	w.Set("kubeconfig", s.kubeconfig)
	w.Set("nodeName", "node-a") // the node its token is bound to
	return w, ns
}

// nad creates a NetworkAttachmentDefinition through the API.
func (s *suite) nad(t *testing.T, namespace, name, config string) {
	t.Helper()
	harness.Must(t, kubeenv.CreateNAD(t.Context(), s.dyn, namespace, name, config))
}

// pod creates a pod bound to a node (there is no scheduler) with the
// selection annotation, unless networks is "".
func (s *suite) pod(t *testing.T, namespace, name, networks string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:   "node-a",
			Containers: []corev1.Container{{Name: "c", Image: "example.invalid/pause"}},
		},
	}
	if networks != "" {
		p.Annotations[networksAnnotation] = networks
	}
	created, err := s.admin.CoreV1().Pods(namespace).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", namespace, name, err)
	}
	return created
}

// container is a sandbox for the pod, sending its real UID as K8S_POD_UID.
func container(w *harness.World, pod *corev1.Pod) *harness.Container {
	c := w.Container(pod.Namespace, pod.Name)
	c.UID = string(pod.UID)
	return c
}

// getPod reads the pod as admin.
func (s *suite) getPod(t *testing.T, namespace, name string) *corev1.Pod {
	t.Helper()
	p, err := s.admin.CoreV1().Pods(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", namespace, name, err)
	}
	return p
}

// status reads the pod's network-status annotation (s5), waiting for it
// to appear: plexusd publishes it after the ADD has answered. The wait is
// a bound, not a measurement.
func (s *suite) status(t *testing.T, namespace, name string) []harness.StatusEntry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	raw, ok := s.getPod(t, namespace, name).Annotations[statusAnnotation]
	for ; !ok && time.Now().Before(deadline); raw, ok = s.getPod(t, namespace, name).Annotations[statusAnnotation] {
		time.Sleep(20 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("pod %s/%s has no %s annotation", namespace, name, statusAnnotation)
	}
	var out []harness.StatusEntry
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("pod %s/%s %s: %v: %s", namespace, name, statusAnnotation, err, raw)
	}
	return out
}

// events lists the events about one pod (by UID, so a re-created pod's
// events are its own), oldest first.
func (s *suite) events(t *testing.T, pod *corev1.Pod) []corev1.Event {
	t.Helper()
	list, err := s.admin.CoreV1().Events(pod.Namespace).List(t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(pod.UID),
	})
	if err != nil {
		t.Fatalf("list events of pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
	})
	return list.Items
}

// eventsWith returns the events of a type and reason.
func eventsWith(evs []corev1.Event, typ, reason string) []corev1.Event {
	var out []corev1.Event
	for _, e := range evs {
		if e.Type == typ && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func describeEvents(evs []corev1.Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message)
	}
	return strings.Join(parts, "\n")
}

// statusInterfaces is "name=interface" per entry, in order, with the
// default entry marked.
func statusInterfaces(st []harness.StatusEntry) []string {
	out := make([]string, len(st))
	for i, e := range st {
		out[i] = e.Name + "=" + e.Interface
		if e.Default {
			out[i] += " (default)"
		}
	}
	return out
}
