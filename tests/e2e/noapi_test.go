package e2e

import (
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestWithoutAPIServer uses a control plane of its own, which it stops:
// DEL never needs the API (the attachment record has everything), and an
// ADD that cannot reach it gives up within apiBudget naming the call.
func TestWithoutAPIServer(t *testing.T) {
	s := newSuite(t)
	w, ns := s.world(t)
	w.Set("apiTimeout", "500ms")
	w.Set("apiBudget", "2s")
	s.nad(t, ns, "blue", w.BridgeNADConfig("blue"))
	pod := s.pod(t, ns, "web", `[{"name":"blue"}]`)
	c := container(w, pod)
	before := harness.HostVeths(t)
	w.Add(c)

	if err := s.env.Stop(); err != nil {
		t.Fatalf("stop the control plane: %v", err)
	}
	w.Del(c)
	w.AssertDetached(c, before)

	other := w.Container(ns, "other")
	_, e := w.Plugin(other, "ADD")
	if e == nil || e.Code != 106 {
		t.Fatalf("ADD without an API server: %+v, want CNI error 106", e)
	}
	for _, want := range []string{"get pod " + ns + "/other", "gave up after", "within 2s"} {
		if !strings.Contains(e.Msg, want) {
			t.Errorf("error %q does not contain %q", e.Msg, want)
		}
	}
	w.AssertNoLeaks(before)
}
