package e2e

import (
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/plexus-cni/plexus/tests/harness"
)

// testThickLifecycle: plexusd with deploy/'s RBAC against the apiserver:
// pods attached through cnitool -> shim -> plexusd, a restart between
// ADD and DEL, and a killed plexusd whose pods the shim still DELs.
func (s *suite) testThickLifecycle(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	one := container(w, s.pod(t, ns, "one", "blue"))
	two := container(w, s.pod(t, ns, "two", "blue,blue"))
	d := w.StartDaemon("--node-name", "node-a")
	before := harness.HostVeths(t)
	w.Add(one)
	if got := statusInterfaces(s.status(t, ns, "one")); len(got) != 2 {
		t.Errorf("network-status of one: %v", got)
	}
	d.Stop()
	d.Start()
	w.Add(two)
	w.Del(one)
	d.Kill()
	w.Del(two)
	for _, c := range []*harness.Container{one, two} {
		w.AssertInterfaces(c, 0, "none after DEL")
	}
	w.AssertNoLeaks(before)
}

// testThickFiftyPods: 50 pods created through the API, ADDed at once
// through the shim and DELed; every one gets its status, nothing leaks.
func (s *suite) testThickFiftyPods(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	cs := make([]*harness.Container, 50)
	for i := range cs {
		cs[i] = container(w, s.pod(t, ns, fmt.Sprintf("pod-%d", i), "blue"))
	}
	w.StartDaemon("--node-name", "node-a", "--max-parallel", "16")
	before := harness.HostVeths(t)
	harness.Parallel(t, cs, func(c *harness.Container) error { _, err := w.CNITool(c, "add"); return err })
	for _, c := range cs {
		if got := statusInterfaces(s.status(t, ns, c.Name)); len(got) != 2 {
			t.Errorf("%s: network-status %v", c.Name, got)
		}
	}
	harness.Parallel(t, cs, func(c *harness.Container) error { _, err := w.CNITool(c, "del"); return err })
	w.AssertNoLeaks(before)
}

// testThickRestartRestoresLostStatus: plexusd publishes network-status
// after answering the ADD; when it stops in between, the status never
// reaches the pod. The next plexusd writes it from the attachment record
// once its pod cache has synced. Here the status is removed through the
// API while plexusd is stopped, which leaves the pod as a lost PATCH
// would.
func (s *suite) testThickRestartRestoresLostStatus(t *testing.T) {
	w, ns := s.world(t)
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	c := container(w, s.pod(t, ns, "lost", "blue"))
	d := w.StartDaemon("--node-name", "node-a")
	before := harness.HostVeths(t)
	w.Add(c)
	want := s.status(t, ns, "lost")
	d.Stop()
	patch := []byte(`{"metadata":{"annotations":{"` + statusAnnotation + `":null}}}`)
	if _, err := s.admin.CoreV1().Pods(ns).Patch(t.Context(), "lost", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d.Start()
	got := s.status(t, ns, "lost") // waits for the annotation
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restored network-status %+v, want the ADD's %+v", got, want)
	}
	w.Del(c)
	w.AssertNoLeaks(before)
}
