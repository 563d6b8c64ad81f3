package e2e

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestKubernetes runs every test that shares one control plane (starting
// one takes seconds); each has its own namespace. They run one after the
// other so the request counts of one are not another's.
func TestKubernetes(t *testing.T) {
	s := newSuite(t)
	t.Run("AttachStatusAndEvent", s.testAttachStatusAndEvent)
	t.Run("RequestCounts", s.testRequestCounts)
	t.Run("RuntimeAnnotationsRequestCounts", s.testRuntimeAnnotationsRequestCounts)
	t.Run("ThickRequestCounts", s.testThickRequestCounts)
	t.Run("ThickLifecycle", s.testThickLifecycle)
	t.Run("ThickRestartRestoresLostStatus", s.testThickRestartRestoresLostStatus)
	t.Run("EndpointSliceFromStatus", s.testEndpointSliceFromStatus)
	t.Run("ThickFiftyPods", s.testThickFiftyPods)
	t.Run("AddTwiceKeepsStatusExact", s.testAddTwice)
	t.Run("PodRecreatedUnderSameName", s.testPodRecreated)
	t.Run("StaticPod", s.testStaticPod)
	t.Run("MissingNAD", s.testMissingNAD)
	t.Run("InvalidSelectionIgnored", s.testInvalidSelection)
	t.Run("FailedAttachment", s.testFailedAttachment)
	t.Run("PolicyDenial", s.testPolicyDenial)
	t.Run("RotatedCredentials", s.testRotatedCredentials)
	t.Run("DeployManifests", s.testDeployManifests)
	t.Run("Kustomizations", s.testKustomizations)
}

// testAttachStatusAndEvent: the default network plus three selections, the
// s5 status written as the one annotation (another annotation set by
// someone else survives), and one Normal event naming every interface.
func (s *suite) testAttachStatusAndEvent(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	s.nad(t, ns, "red", w.BridgeNADConfig("red"))
	pod := s.pod(t, ns, "web", `[{"name":"blue"},{"name":"red","interface":"red0"},{"name":"blue"}]`)
	// Someone else's annotation, set after plexus could have read the pod
	// template: a PATCH of the one annotation leaves it alone.
	patch := []byte(`{"metadata":{"annotations":{"example.com/owner":"team-a"}}}`)
	if _, err := s.admin.CoreV1().Pods(ns).Patch(t.Context(), "web", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c := container(w, pod)
	before := harness.HostVeths(t)
	w.Add(c)

	if got, want := harness.IfNames(c.Links(t)), []string{"eth0", "net1", "net2", "red0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("interfaces %v, want %v", got, want)
	}
	st := s.status(t, ns, "web")
	want := []string{"cluster-default=eth0 (default)", ns + "/blue=net1", ns + "/red=red0", ns + "/blue=net2"}
	if got := statusInterfaces(st); !reflect.DeepEqual(got, want) {
		t.Errorf("network-status %v, want %v", got, want)
	}
	for _, e := range st {
		if len(e.IPs) != 1 || e.MAC == "" {
			t.Errorf("status entry %s: ips %v mac %q, want one IP and a MAC", e.Name, e.IPs, e.MAC)
		}
	}
	if owner := s.getPod(t, ns, "web").Annotations["example.com/owner"]; owner != "team-a" {
		t.Errorf("annotation example.com/owner = %q after ADD, want team-a (status must be a PATCH of its own annotation)", owner)
	}
	evs := s.events(t, pod)
	normal := eventsWith(evs, corev1.EventTypeNormal, "AddedInterfaces")
	if len(normal) != 1 || len(evs) != 1 {
		t.Fatalf("want exactly one event, Normal AddedInterfaces; got:\n%s", describeEvents(evs))
	}
	for _, part := range []string{"eth0 from cluster-default", "net1 from " + ns + "/blue", "red0 from " + ns + "/red", "net2 from " + ns + "/blue"} {
		if !strings.Contains(normal[0].Message, part) {
			t.Errorf("event message %q does not mention %q", normal[0].Message, part)
		}
	}
	if normal[0].Source.Component != "plexus" || normal[0].InvolvedObject.Name != "web" {
		t.Errorf("event source %+v involvedObject %+v", normal[0].Source, normal[0].InvolvedObject)
	}
	w.Del(c)
	w.AssertDetached(c, before)
}

// testAddTwice: a repeated ADD detaches the earlier attachments first, and
// the status it publishes replaces the earlier one: no entry lost or doubled.
func (s *suite) testAddTwice(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	pod := s.pod(t, ns, "web", `[{"name":"blue"}]`)
	c := container(w, pod)
	before := harness.HostVeths(t)
	w.Add(c)
	first := s.status(t, ns, "web")
	w.Add(c)
	second := s.status(t, ns, "web")
	want := []string{"cluster-default=eth0 (default)", ns + "/blue=net1"}
	if got := statusInterfaces(second); !reflect.DeepEqual(got, want) {
		t.Errorf("network-status after ADD twice %v, want %v", got, want)
	}
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0", "net1"}) {
		t.Errorf("interfaces after ADD twice %v", got)
	}
	// The status describes the second ADD's interfaces, not the first's.
	links := c.Links(t)
	for _, e := range second {
		if mac := links[e.Interface].Attrs().HardwareAddr.String(); mac != e.MAC {
			t.Errorf("status %s mac %s, but %s has %s", e.Name, e.MAC, e.Interface, mac)
		}
	}
	if len(first) != len(second) {
		t.Errorf("status had %d entries after the first ADD, %d after the second", len(first), len(second))
	}
	if n := len(eventsWith(s.events(t, pod), corev1.EventTypeNormal, "AddedInterfaces")); n != 2 {
		t.Errorf("AddedInterfaces events = %d, want one per ADD (2)", n)
	}
	w.Del(c)
	w.AssertNoLeaks(before)
}

// testPodRecreated: K8S_POD_UID names the pod the runtime means; a pod
// re-created under the same name is another pod. ADD refuses, DEL proceeds.
func (s *suite) testPodRecreated(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	old := s.pod(t, ns, "web", `[{"name":"blue"}]`)
	c := container(w, old)
	before := harness.HostVeths(t)
	w.Add(c)

	if err := s.admin.CoreV1().Pods(ns).Delete(t.Context(), "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	fresh := s.pod(t, ns, "web", `[{"name":"blue"}]`)
	if fresh.UID == old.UID {
		t.Fatal("re-created pod kept its UID")
	}
	// DEL of the old sandbox needs nothing from the API.
	w.Del(c)
	w.AssertNoLeaks(before)

	// A (late) ADD for the old pod must not attach the new one.
	stale := container(w, old)
	_, e := w.Plugin(stale, "ADD")
	if e == nil || e.Code != 106 {
		t.Fatalf("ADD with the old pod UID: %+v, want CNI error 106", e)
	}
	for _, want := range []string{"pod " + ns + "/web", string(old.UID), string(fresh.UID), "re-created"} {
		if !strings.Contains(e.Msg, want) {
			t.Errorf("error %q does not mention %q", e.Msg, want)
		}
	}
	w.AssertDetached(stale, before)
	w.MustPlugin(stale, "DEL", "DEL after the refused ADD")
	if _, ok := s.getPod(t, ns, "web").Annotations[statusAnnotation]; ok {
		t.Error("the re-created pod got a network-status from the old pod's ADD")
	}
}

// testMissingNAD: s3.4 - a selected NAD that does not exist fails the ADD
// naming it, with a Warning event, and leaves nothing attached.
func (s *suite) testMissingNAD(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	pod := s.pod(t, ns, "web", `[{"name":"blue"},{"name":"nope"}]`)
	c := container(w, pod)
	before := harness.HostVeths(t)
	_, e := w.Plugin(c, "ADD")
	if e == nil || e.Code != 101 || !strings.Contains(e.Msg, "network "+ns+"/nope") || !strings.Contains(e.Msg, "not found") {
		t.Fatalf("ADD with a missing NAD: %+v, want CNI error 101 naming %s/nope", e, ns)
	}
	warn := eventsWith(s.events(t, pod), corev1.EventTypeWarning, "NetworkNotFound")
	if len(warn) != 1 || !strings.Contains(warn[0].Message, ns+"/nope") {
		t.Errorf("want one Warning NetworkNotFound naming %s/nope; events:\n%s", ns, describeEvents(s.events(t, pod)))
	}
	w.AssertDetached(c, before)
	w.MustPlugin(c, "DEL", "DEL after the failed ADD")
}

// testInvalidSelection: s4.1 - an invalid annotation is ignored: the pod
// gets the default network only, and a Warning event says why.
func (s *suite) testInvalidSelection(t *testing.T) {
	w, ns := s.world(t)
	pod := s.pod(t, ns, "web", `[{"name":`)
	c := container(w, pod)
	before := harness.HostVeths(t)
	w.Add(c)
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0"}) {
		t.Errorf("interfaces %v, want the default network only", got)
	}
	if got := statusInterfaces(s.status(t, ns, "web")); !reflect.DeepEqual(got, []string{"cluster-default=eth0 (default)"}) {
		t.Errorf("network-status %v", got)
	}
	evs := s.events(t, pod)
	warn := eventsWith(evs, corev1.EventTypeWarning, "InvalidNetworkSelection")
	if len(warn) != 1 || !strings.Contains(warn[0].Message, "default network only") {
		t.Errorf("want one Warning InvalidNetworkSelection; events:\n%s", describeEvents(evs))
	}
	if len(eventsWith(evs, corev1.EventTypeNormal, "AddedInterfaces")) != 1 {
		t.Errorf("want the Normal AddedInterfaces event too; events:\n%s", describeEvents(evs))
	}
	w.Del(c)
	w.AssertNoLeaks(before)
}

// testFailedAttachment: s7.2 - a delegate that fails (macvlan on a master
// that does not exist) fails the ADD, undoes the default network and says
// so in a Warning event.
func (s *suite) testFailedAttachment(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	s.nad(t, ns, "mv", `{"cniVersion":"1.0.0","name":"mv","type":"macvlan","master":"nosuchdev0","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+w.IPAMDir+`"}}`)
	pod := s.pod(t, ns, "web", `[{"name":"blue"},{"name":"mv"}]`)
	c := container(w, pod)
	before := harness.HostVeths(t)
	_, e := w.Plugin(c, "ADD")
	if e == nil || e.Code != 104 || !strings.Contains(e.Msg, ns+"/mv (net2)") {
		t.Fatalf("ADD with a failing delegate: %+v, want CNI error 104 naming %s/mv (net2)", e, ns)
	}
	evs := s.events(t, pod)
	warn := eventsWith(evs, corev1.EventTypeWarning, "NetworkAttachFailed")
	if len(warn) != 1 || !strings.Contains(warn[0].Message, ns+"/mv (net2)") || !strings.Contains(warn[0].Message, `type="macvlan"`) {
		t.Errorf("want one Warning NetworkAttachFailed naming %s/mv and the reason; events:\n%s", ns, describeEvents(evs))
	}
	if n := len(eventsWith(evs, corev1.EventTypeNormal, "AddedInterfaces")); n != 0 {
		t.Errorf("a failed ADD recorded %d AddedInterfaces events", n)
	}
	if _, ok := s.getPod(t, ns, "web").Annotations[statusAnnotation]; ok {
		t.Error("a failed ADD published network-status")
	}
	w.AssertDetached(c, before)
	w.MustPlugin(c, "DEL", "DEL after the failed ADD")
}

// testPolicyDenial: s7.4 - a Rego denial fails the ADD before any
// delegate runs, with CNI error 102 and one Warning event naming the rule.
func (s *suite) testPolicyDenial(t *testing.T) {
	w, ns := s.world(t)
	other := ns + "-other"
	harness.Must(t, s.env.CreateNamespace(t.Context(), other, nil))
	s.nad(t, other, "foreign", w.BridgeNADConfig("foreign"))
	w.UseLibraryPolicy("admin.yaml", "plexus:\n  config:\n    namespace_isolation: {enabled: true}\n")
	pod := s.pod(t, ns, "web", other+"/foreign")
	c := container(w, pod)
	before := harness.HostVeths(t)
	_, e := w.Plugin(c, "ADD")
	if e == nil || e.Code != 102 || !strings.Contains(e.Msg, other+"/foreign") || !strings.Contains(e.Msg, "[namespace-isolation]") {
		t.Fatalf("ADD of a cross-namespace selection: %+v, want CNI error 102 naming the network and rule", e)
	}
	evs := s.events(t, pod)
	warn := eventsWith(evs, corev1.EventTypeWarning, "NetworkAttachmentDenied")
	if len(warn) != 1 || !strings.Contains(warn[0].Message, "namespace-isolation") {
		t.Errorf("want one Warning NetworkAttachmentDenied naming the rule; events:\n%s", describeEvents(evs))
	}
	w.AssertDetached(c, before)
}
