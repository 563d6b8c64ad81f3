package node

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// dynamicCondition is the pod condition plexusd sets for dynamic
// attachments (core/api/v1alpha1.PodConditionNetworkAttachments).
const dynamicCondition = "plexus.io/NetworkAttachments"

// dynamicWait bounds the wait for plexusd to apply a change; it takes
// milliseconds, the margin is for a loaded machine.
const dynamicWait = 90 * time.Second

// dynamicWorld is a World whose plexusd has dynamicAttachments on (CRI:
// the node's containerd) and the library's namespace isolation policy,
// installed as the node's CNI config, with the bridge NADs blue and red
// and a failing NAD broken (macvlan on a missing master) in ns.
func dynamicWorld(t *testing.T, node *Node, ns string) (*Node, *harness.World, *harness.Daemon) {
	t.Helper()
	n := node.With(t)
	w := n.PlexusWorld()
	w.Set("dynamicAttachments", true)
	w.Set("criSocket", n.Socket)
	w.UseLibraryPolicy("admin.yaml", "plexus:\n  config:\n    namespace_isolation: {enabled: true}\n")
	d := w.StartDaemon("--node-name", n.Name)
	t.Cleanup(func() { logOnFailure(t, d) })
	n.InstallPlexus(w)
	bridgeNADs(t, n, w, ns, "blue", "red")
	broken := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"broken","type":"macvlan","master":"pxnosuch0","ipam":{"type":"host-local","subnet":%q,"dataDir":%q}}`, harness.Subnet(), w.IPAMDir)
	harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, ns, "broken", broken))
	return n, w, d
}

// setNetworks changes the pod's selection annotation.
func (n *Node) setNetworks(ns, name, networks string) {
	n.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{NetworksAnnotation: networks}}})
	harness.Must(n.t, err)
	if _, err := n.Client.CoreV1().Pods(ns).Patch(n.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		n.t.Fatalf("set %s of pod %s/%s: %v", NetworksAnnotation, ns, name, err)
	}
}

// statusNames is network-status as "name interface" pairs, "" when none.
func statusNames(pod *corev1.Pod) []string {
	var st []harness.StatusEntry
	if json.Unmarshal([]byte(pod.Annotations[StatusAnnotation]), &st) != nil {
		return nil
	}
	out := []string{}
	for _, e := range st {
		out = append(out, e.Name+" "+e.Interface)
	}
	return out
}

func wantNames(want []attachment) []string {
	out := []string{}
	for _, a := range want {
		out = append(out, a.network+" "+a.ifName)
	}
	return out
}

// waitAttached waits until network-status lists want, then checks the
// pod's namespace has exactly those interfaces with those addresses.
func waitAttached(t *testing.T, n *Node, pod *corev1.Pod, want []attachment) {
	t.Helper()
	n.waitPod(pod.Namespace, pod.Name, fmt.Sprintf("network-status %v", wantNames(want)), func(p *corev1.Pod) bool {
		return reflect.DeepEqual(statusNames(p), wantNames(want))
	})
	assertAttached(t, n, pod, want)
}

// waitPod polls the pod until cond holds, failing with its status and
// events after dynamicWait.
func (n *Node) waitPod(ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	n.t.Helper()
	deadline := time.Now().Add(dynamicWait)
	for {
		p := n.GetPod(ns, name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("pod %s/%s: no %s within %s; network-status %s\nconditions %+v\nevents:\n%s",
				ns, name, what, dynamicWait, p.Annotations[StatusAnnotation], p.Status.Conditions, n.PodEvents(ns, name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRefused waits for the Warning event reason and the condition False
// with condReason, the pod's attachments still want.
func waitRefused(t *testing.T, n *Node, pod *corev1.Pod, reason, condReason string, want []attachment) {
	t.Helper()
	n.waitPod(pod.Namespace, pod.Name, "condition "+condReason, func(p *corev1.Pod) bool {
		c := podCondition(p, dynamicCondition)
		return c != nil && c.Status == corev1.ConditionFalse && string(c.Reason) == condReason
	})
	if ev := n.PodEvents(pod.Namespace, pod.Name); !strings.Contains(ev, "Warning "+reason) {
		t.Errorf("no Warning %s event:\n%s", reason, ev)
	}
	// A transient failure is retried (after 5s): each try restores the
	// pod before it reports.
	waitAttached(t, n, pod, want)
	if p := n.GetPod(pod.Namespace, pod.Name); p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod is %s after a refused change, want Running", p.Status.Phase)
	}
}

func podCondition(p *corev1.Pod, typ string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func blueOnly(ns string) []attachment {
	return []attachment{{DefaultNetwork, "eth0"}, {ns + "/blue", "net1"}}
}

// TestDynamic is dynamic attachments (spec open question 2) in thick mode
// under kubelet and containerd: changes of a running pod's selection
// annotation are applied in its network namespace, refused ones leave it
// as it was, and nothing is left once the pod is deleted.
func TestDynamic(t *testing.T) {
	node := startNode(t, "node-dynamic")

	// Add a network, remove one, rename an interface: each change shows in
	// the pod's namespace and network-status, with Normal events and the
	// condition True.
	t.Run("AddRemoveRename", func(t *testing.T) {
		const ns = "dyn-change"
		n, w, _ := dynamicWorld(t, node, ns)
		before := harness.HostVeths(t)
		pod := n.RunPod(ns, "pod-a", "blue")
		sb := n.ReadySandbox(pod)
		assertAttached(t, n, pod, blueOnly(ns))

		n.setNetworks(ns, "pod-a", "blue,red")
		waitAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {ns + "/blue", "net1"}, {ns + "/red", "net2"}})
		n.setNetworks(ns, "pod-a", "red")
		waitAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {ns + "/red", "net2"}})
		n.setNetworks(ns, "pod-a", `[{"name":"red","interface":"data0"}]`)
		waitAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {ns + "/red", "data0"}})

		p := n.GetPod(ns, "pod-a")
		if c := podCondition(p, dynamicCondition); c == nil || c.Status != corev1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", dynamicCondition, c)
		}
		ev := n.PodEvents(ns, "pod-a")
		for _, r := range []string{"Normal AddedInterfaces", "Normal RemovedInterfaces"} {
			if !strings.Contains(ev, r) {
				t.Errorf("no %s event:\n%s", r, ev)
			}
		}
		if got := n.ReadySandbox(pod); got.ID != sb.ID {
			t.Errorf("the pod's sandbox changed from %s to %s", sb.ID, got.ID)
		}
		n.DeletePod(ns, "pod-a")
		assertCleanedUp(t, w, before, sb.ID)
	})

	// A network the policy denies (another namespace's, under namespace
	// isolation) and a delegate that fails (after the pod's blue was moved
	// to another interface): the pod keeps what it had, a Warning event
	// and the condition say why, and a later change is still applied.
	t.Run("Refused", func(t *testing.T) {
		const ns = "dyn-refused"
		n, w, _ := dynamicWorld(t, node, ns)
		bridgeNADs(t, n, w, "dyn-other", "green")
		before := harness.HostVeths(t)
		pod := n.RunPod(ns, "pod-a", "blue")
		sb := n.ReadySandbox(pod)

		n.setNetworks(ns, "pod-a", "blue,dyn-other/green")
		waitRefused(t, n, pod, "NetworkAttachmentDenied", "PolicyDenied", blueOnly(ns))

		n.setNetworks(ns, "pod-a", `[{"name":"blue","interface":"data0"},{"name":"broken"}]`)
		waitRefused(t, n, pod, "NetworkAttachFailed", "AttachFailed", blueOnly(ns))

		n.setNetworks(ns, "pod-a", "blue,red")
		waitAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {ns + "/blue", "net1"}, {ns + "/red", "net2"}})
		n.DeletePod(ns, "pod-a")
		assertCleanedUp(t, w, before, sb.ID)
	})

	// Several pods changed at once all get their new network.
	t.Run("ManyPods", func(t *testing.T) {
		const ns = "dyn-many"
		n, w, _ := dynamicWorld(t, node, ns)
		before := harness.HostVeths(t)
		const count = 4
		var pods []*corev1.Pod
		var sbs []string
		for i := range count {
			p := n.RunPod(ns, fmt.Sprintf("pod-%d", i), "blue")
			pods = append(pods, p)
			sbs = append(sbs, n.ReadySandbox(p).ID)
		}
		var wg sync.WaitGroup
		for _, p := range pods {
			wg.Go(func() { n.setNetworks(ns, p.Name, "blue,red") })
		}
		wg.Wait()
		for _, p := range pods {
			waitAttached(t, n, p, []attachment{{DefaultNetwork, "eth0"}, {ns + "/blue", "net1"}, {ns + "/red", "net2"}})
		}
		for _, p := range pods {
			n.DeletePod(ns, p.Name)
		}
		for _, id := range sbs {
			assertCleanedUp(t, w, before, id)
		}
	})

	// plexusd is killed right after a change and another is made while it
	// is down: the new plexusd applies the pod's selection as it is then.
	t.Run("PlexusdRestartedMidChange", func(t *testing.T) {
		const ns = "dyn-restart"
		n, w, d := dynamicWorld(t, node, ns)
		before := harness.HostVeths(t)
		pod := n.RunPod(ns, "pod-a", "blue")
		sb := n.ReadySandbox(pod)

		n.setNetworks(ns, "pod-a", "blue,red")
		d.Kill()
		n.setNetworks(ns, "pod-a", `[{"name":"red","interface":"data0"}]`)
		d.Start()
		waitAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {ns + "/red", "data0"}})
		n.DeletePod(ns, "pod-a")
		assertCleanedUp(t, w, before, sb.ID)
	})

	// The pod is deleted right after a change: its DEL, serialized with
	// the change, removes whatever the change attached.
	t.Run("PodDeletedMidChange", func(t *testing.T) {
		const ns = "dyn-delete"
		n, w, _ := dynamicWorld(t, node, ns)
		before := harness.HostVeths(t)
		pod := n.RunPod(ns, "pod-a", "blue")
		sb := n.ReadySandbox(pod)

		n.setNetworks(ns, "pod-a", "blue,red")
		n.DeletePod(ns, "pod-a")
		assertCleanedUp(t, w, before, sb.ID)
	})
}

// BenchmarkDynamicAttach measures, on a real node, the time from a change
// of a running pod's selection annotation (the API's answer to the patch)
// to network-status listing the new network, whose interface is then
// checked in the pod's namespace; and the same for removing it again.
// It reports the median and p99 of each in ms.
//
//	PLEXUS_E2E=1 go test -run '^$' -bench DynamicAttach -benchtime 30x ./tests/node/
func BenchmarkDynamicAttach(b *testing.B) {
	env := kubeenv.ForTest(b, kubeenv.Options{})
	n := Start(b, env, Options{Name: "node-dynbench"})
	w := n.PlexusWorld()
	w.Set("dynamicAttachments", true)
	w.Set("criSocket", n.Socket)
	w.StartDaemon("--node-name", n.Name)
	n.InstallPlexus(w)
	const ns = "dyn-bench"
	harness.Must(b, env.CreateNamespace(b.Context(), ns, nil))
	for _, nad := range []string{"blue", "red"} {
		harness.Must(b, kubeenv.CreateNAD(b.Context(), n.Dyn, ns, nad, w.BridgeNADConfig(nad)))
	}
	pod := n.RunPod(ns, "pod-a", "blue")
	c := n.PodNetns(pod)
	var add, del []time.Duration
	for range b.N {
		add = append(add, timeChange(b, n, ns, "blue,red", 3))
		if _, ok := c.Links(b)["net2"]; !ok {
			b.Fatal("net2 missing after network-status listed it")
		}
		del = append(del, timeChange(b, n, ns, "blue", 2))
		if _, ok := c.Links(b)["net2"]; ok {
			b.Fatal("net2 still there after network-status dropped it")
		}
	}
	report := func(name string, ds []time.Duration) {
		b.ReportMetric(float64(median(ds).Microseconds())/1000, "ms-median-"+name)
		b.ReportMetric(float64(percentile(ds, 99).Microseconds())/1000, "ms-p99-"+name)
		b.Logf("%s: %v", name, ds)
	}
	report("attach", add)
	report("detach", del)
}

// timeChange sets the pod's selection and returns how long until a watch
// sees network-status with entries entries.
func timeChange(b *testing.B, n *Node, ns, networks string, entries int) time.Duration {
	ctx, cancel := context.WithTimeout(b.Context(), dynamicWait)
	defer cancel()
	watcher, err := n.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=pod-a"})
	harness.Must(b, err)
	defer watcher.Stop()
	start := time.Now()
	n.setNetworks(ns, "pod-a", networks)
	for ev := range watcher.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && len(statusNames(p)) == entries {
			return time.Since(start)
		}
	}
	b.Fatalf("network-status with %d entries not seen within %s", entries, dynamicWait)
	return 0
}
