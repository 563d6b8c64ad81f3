package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/tests/harness"
)

// The annotations of the spec (s4.1, s5).
const (
	NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"
	StatusAnnotation   = "k8s.v1.cni.cncf.io/network-status"
)

// podTimeout bounds the wait for one pod to run or go; they take seconds.
const podTimeout = 90 * time.Second

// PodSpec is a pod bound to this node (no scheduler needed) running the
// pause image, which is never pulled, with the selection annotation unless
// networks is "". It mounts no ServiceAccount token: that volume needs the
// kube-root-ca.crt ConfigMap, which no controller publishes here.
func (n *Node) PodSpec(namespace, name, networks string) *corev1.Pod {
	grace := int64(2)
	automount := false
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:                      n.Name,
			AutomountServiceAccountToken:  &automount,
			TerminationGracePeriodSeconds: &grace,
			DNSPolicy:                     corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	if networks != "" {
		p.Annotations[NetworksAnnotation] = networks
	}
	return p
}

// CreatePod creates pod through the API.
func (n *Node) CreatePod(pod *corev1.Pod) *corev1.Pod {
	n.t.Helper()
	created, err := n.Client.CoreV1().Pods(pod.Namespace).Create(n.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return created
}

// RunPod creates the pod of PodSpec and waits until it is Running.
func (n *Node) RunPod(namespace, name, networks string) *corev1.Pod {
	n.t.Helper()
	n.CreatePod(n.PodSpec(namespace, name, networks))
	return n.WaitRunning(namespace, name)
}

// WaitRunning waits until the pod's phase is Running and returns it. It
// fails at once when the pod fails or kubelet reports a failed sandbox
// (FailedCreatePodSandBox, whose message carries the CNI error).
func (n *Node) WaitRunning(namespace, name string) *corev1.Pod {
	n.t.Helper()
	p, err := n.waitRunning(namespace, name)
	if err != nil {
		n.t.Fatalf("pod %s/%s not Running: %v\nevents:\n%s", namespace, name, err, n.PodEvents(namespace, name))
	}
	return p
}

// SandboxError is the error WaitRunning's wait ends with when kubelet
// reports a failed sandbox.
type SandboxError struct{ Message string }

func (e *SandboxError) Error() string { return "sandbox failed: " + e.Message }

func (n *Node) waitRunning(namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeoutCause(n.t.Context(), podTimeout, fmt.Errorf("not Running within %s", podTimeout))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	go func() {
		for ctx.Err() == nil {
			if msg := n.sandboxFailure(ctx, namespace, name); msg != "" {
				fail(&SandboxError{Message: msg})
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	ev, err := n.untilPod(ctx, namespace, name, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*corev1.Pod)
		if !ok || e.Type == watch.Deleted {
			return false, fmt.Errorf("pod %s/%s was deleted", namespace, name)
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod %s/%s failed: %s", namespace, name, p.Status.Message)
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			return nil, cause
		}
		return nil, err
	}
	return ev.Object.(*corev1.Pod), nil
}

// sandboxFailure is the message of the pod's first FailedCreatePodSandBox
// event, "" if there is none.
func (n *Node) sandboxFailure(ctx context.Context, namespace, name string) string {
	list, err := n.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.name", name),
			fields.OneTermEqualSelector("reason", "FailedCreatePodSandBox")).String(),
	})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	return list.Items[0].Message
}

// DeletePod deletes the pod gracefully, waits until it is gone from the
// API, then removes its sandboxes. Kubelet removes a gracefully deleted pod
// only once it has stopped the pod's sandbox, so by then the CNI DEL has
// run; removing the sandbox is what kubelet's periodic garbage collection
// would do later, and containerd sends a second DEL for it.
func (n *Node) DeletePod(namespace, name string) {
	n.t.Helper()
	pod := n.GetPod(namespace, name)
	ctx, cancel := context.WithTimeout(n.t.Context(), podTimeout)
	defer cancel()
	if err := n.Client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		n.t.Fatalf("delete pod %s/%s: %v", namespace, name, err)
	}
	n.WaitGone(namespace, name)
	n.RemoveSandboxes(pod)
}

// RemoveSandboxes removes every sandbox of the pod through the CRI, as
// kubelet's garbage collection does once the pod is gone (RemovePodSandbox
// alone). The sandboxes must be stopped. One that kubelet's own garbage
// collection removed between the listing and the removal counts as removed.
func (n *Node) RemoveSandboxes(pod *corev1.Pod) {
	n.t.Helper()
	for _, sb := range n.Sandboxes(pod, "") {
		n.removeSandbox(sb.ID)
	}
}

// removeSandbox runs RemovePodSandbox until the sandbox is gone, a few
// times at most: when kubelet's garbage collection removes a container of
// the sandbox meanwhile, CRI-O fails the removal ("no such id") and the
// next try finds the rest.
func (n *Node) removeSandbox(id string) {
	n.t.Helper()
	var err error
	for try := range 3 {
		if try > 0 {
			time.Sleep(time.Second)
		}
		_, err = n.Crictl(n.t.Context(), "rmp", id)
		if err == nil || strings.Contains(err.Error(), "NotFound") {
			return
		}
	}
	n.t.Fatal(err)
}

// WaitGone waits until the pod no longer exists in the API.
func (n *Node) WaitGone(namespace, name string) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), podTimeout)
	defer cancel()
	_, err := n.untilPod(ctx, namespace, name, func(e watch.Event) (bool, error) {
		return e.Type == watch.Deleted, nil
	})
	if err != nil {
		n.t.Fatalf("pod %s/%s not gone: %v\nevents:\n%s", namespace, name, err, n.PodEvents(namespace, name))
	}
}

// untilPod watches one pod until cond holds and returns the event it held
// on. A pod already gone counts as a Deleted event.
func (n *Node) untilPod(ctx context.Context, namespace, name string, cond watchtools.ConditionFunc) (*watch.Event, error) {
	lw := cache.NewListWatchFromClient(n.Client.CoreV1().RESTClient(), "pods", namespace,
		fields.OneTermEqualSelector("metadata.name", name))
	var last watch.Event
	check := func(e watch.Event) (bool, error) {
		last = e
		return cond(e)
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(store cache.Store) (bool, error) {
		if items := store.List(); len(items) > 0 {
			return check(watch.Event{Type: watch.Added, Object: items[0].(k8sruntime.Object)})
		}
		return check(watch.Event{Type: watch.Deleted, Object: &corev1.Pod{}})
	}, check)
	if err != nil {
		return nil, err
	}
	return &last, nil
}

// PodEvents lists the events about a pod, oldest first, one per line.
func (n *Node) PodEvents(namespace, name string) string {
	list, err := n.Client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
	})
	if err != nil {
		return err.Error()
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].LastTimestamp.Before(&list.Items[j].LastTimestamp)
	})
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "%s %s %s (x%d): %s\n", e.LastTimestamp.Format(time.RFC3339), e.Type, e.Reason, e.Count, e.Message)
	}
	return b.String()
}

// GetPod reads a pod through the API.
func (n *Node) GetPod(namespace, name string) *corev1.Pod {
	n.t.Helper()
	p, err := n.Client.CoreV1().Pods(namespace).Get(n.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatalf("get pod %s/%s: %v", namespace, name, err)
	}
	return p
}

// NetworkStatus is the pod's network-status annotation (s5), waited for:
// plexusd publishes it after the ADD has answered, so it may appear just
// after the pod runs. The wait is a bound, not a measurement.
func (n *Node) NetworkStatus(namespace, name string) []harness.StatusEntry {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	raw, ok := n.GetPod(namespace, name).Annotations[StatusAnnotation]
	for ; !ok && time.Now().Before(deadline); raw, ok = n.GetPod(namespace, name).Annotations[StatusAnnotation] {
		time.Sleep(20 * time.Millisecond)
	}
	if !ok {
		n.t.Fatalf("pod %s/%s has no %s annotation", namespace, name, StatusAnnotation)
	}
	var out []harness.StatusEntry
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		n.t.Fatalf("pod %s/%s %s: %v: %s", namespace, name, StatusAnnotation, err, raw)
	}
	return out
}

// Sandbox is a pod's sandbox as containerd reports it.
type Sandbox struct {
	ID  string
	PID int // the sandbox's pause process
	// Netns is the network namespace path containerd gave the CNI plugins.
	Netns string
}

// Sandboxes lists the pod's sandboxes in the given CRI state ("ready",
// "notready", "" for all), newest first.
func (n *Node) Sandboxes(pod *corev1.Pod, state string) []Sandbox {
	n.t.Helper()
	args := []string{"pods", "-o", "json", "--label", "io.kubernetes.pod.uid=" + SandboxUID(pod)}
	if state != "" {
		args = append(args, "--state", state)
	}
	out, err := n.Crictl(n.t.Context(), args...)
	harness.Must(n.t, err)
	var list struct {
		Items []struct {
			ID        string `json:"id"`
			CreatedAt string `json:"createdAt"`
		} `json:"items"`
	}
	harness.Must(n.t, json.Unmarshal([]byte(out), &list))
	sort.Slice(list.Items, func(i, j int) bool {
		a, _ := strconv.ParseInt(list.Items[i].CreatedAt, 10, 64)
		b, _ := strconv.ParseInt(list.Items[j].CreatedAt, 10, 64)
		return a > b
	})
	var sbs []Sandbox
	for _, it := range list.Items {
		sbs = append(sbs, n.inspectSandbox(it.ID))
	}
	return sbs
}

// SandboxUID is the pod UID kubelet gives the pod's sandboxes: a mirror
// pod's sandbox has its static pod's UID (kubernetes.io/config.mirror).
func SandboxUID(pod *corev1.Pod) string {
	if uid, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return uid
	}
	return string(pod.UID)
}

// WaitSandboxStopped waits until the sandbox is not ready (stopped, so its
// networks were torn down) or removed.
func (n *Node) WaitSandboxStopped(id string) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), podTimeout)
	defer cancel()
	for {
		out, err := n.Crictl(ctx, "inspectp", "-o", "go-template", "--template", "{{.status.state}}", id)
		if err != nil && strings.Contains(err.Error(), "not found") {
			return
		}
		if err == nil && strings.TrimSpace(out) != "SANDBOX_READY" {
			return
		}
		if ctx.Err() != nil {
			n.t.Fatalf("sandbox %s still ready after %s (%q, %v)", id, podTimeout, out, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ReadySandbox is the pod's one ready sandbox.
func (n *Node) ReadySandbox(pod *corev1.Pod) Sandbox {
	n.t.Helper()
	sbs := n.Sandboxes(pod, "ready")
	if len(sbs) != 1 {
		n.t.Fatalf("pod %s/%s has %d ready sandboxes, want 1: %+v", pod.Namespace, pod.Name, len(sbs), sbs)
	}
	return sbs[0]
}

func (n *Node) inspectSandbox(id string) Sandbox {
	n.t.Helper()
	out, err := n.Crictl(n.t.Context(), "inspectp", id)
	harness.Must(n.t, err)
	var insp struct {
		Info struct {
			PID         int `json:"pid"`
			RuntimeSpec struct {
				Linux struct {
					Namespaces []struct {
						Type string `json:"type"`
						Path string `json:"path"`
					} `json:"namespaces"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &insp); err != nil {
		n.t.Fatalf("crictl inspectp %s: %v: %s", id, err, out)
	}
	sb := Sandbox{ID: id, PID: insp.Info.PID}
	for _, ns := range insp.Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			sb.Netns = ns.Path
		}
	}
	return sb
}

// PodNetns opens the network namespace of the pod's ready sandbox (by its
// pause process; by its pinned path when it has none, as CRI-O's
// sandboxes without an infra container) as a harness Container, for Links and Addrs. It is closed
// when the test ends.
func (n *Node) PodNetns(pod *corev1.Pod) *harness.Container {
	n.t.Helper()
	sb := n.ReadySandbox(pod)
	path := sb.Netns
	if sb.PID > 0 {
		path = filepath.Join("/proc", strconv.Itoa(sb.PID), "ns", "net")
	}
	if path == "" {
		n.t.Fatalf("sandbox %s of pod %s/%s has neither a pid nor a netns path", sb.ID, pod.Namespace, pod.Name)
	}
	netns, err := ns.GetNS(path)
	harness.Must(n.t, err)
	n.t.Cleanup(func() { netns.Close() })
	return &harness.Container{NS: netns, Namespace: pod.Namespace, Name: pod.Name, UID: SandboxUID(pod)}
}

// WriteStaticPod writes pod as a manifest into kubelet's staticPodPath.
func (n *Node) WriteStaticPod(pod *corev1.Pod) string {
	n.t.Helper()
	pod = pod.DeepCopy()
	pod.Spec.NodeName = "" // kubelet sets it
	data, err := yaml.Marshal(pod)
	harness.Must(n.t, err)
	path := filepath.Join(n.StaticPodDir, pod.Namespace+"-"+pod.Name+".yaml")
	tmp := filepath.Join(n.StaticPodDir, ".tmp-"+pod.Name)
	harness.Must(n.t, os.WriteFile(tmp, data, 0o644))
	harness.Must(n.t, os.Rename(tmp, path))
	return path
}

// MirrorPodName is the name of the API's mirror of a static pod.
func (n *Node) MirrorPodName(staticName string) string { return staticName + "-" + n.Name }

// runtimeResults is containerd's libcni result cache: the host's, as the
// CRI plugin of containerd (1.6 and 2.x) has no setting for it.
const runtimeResults = sharedCNIDir + "/results"

// CNICacheEntries lists libcni's result cache files (the runtime's, in
// /var/lib/cni/results) that name the container ID.
func CNICacheEntries(containerID string) []string {
	entries, _ := os.ReadDir(runtimeResults)
	var out []string
	for _, e := range entries {
		if strings.Contains(e.Name(), containerID) {
			out = append(out, e.Name())
		}
	}
	return out
}

// RemoveCNICacheEntries removes the runtime's result cache files of a
// sandbox whose DEL the test made containerd skip (libcni removes them on
// DEL).
func RemoveCNICacheEntries(t testing.TB, containerID string) {
	t.Helper()
	for _, e := range CNICacheEntries(containerID) {
		if err := os.Remove(filepath.Join(runtimeResults, e)); err != nil {
			t.Errorf("remove the runtime's cached result %s: %v", e, err)
		}
	}
}
