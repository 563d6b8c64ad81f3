package thick

import (
	"reflect"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestThickPodAnnotationsFromTheRuntime: the runtime's pod annotations
// reach plexusd through the shim, and plexusd takes the selection from
// them: the manifests source has no such pod, which would fail the ADD.
func TestThickPodAnnotationsFromTheRuntime(t *testing.T) {
	w := harness.New(t)
	w.Set("capabilities", map[string]bool{"io.kubernetes.cri.pod-annotations": true})
	w.StartDaemon()
	w.BridgeNAD("demo", "net-a")
	c := w.Container("demo", "web")
	c.Env = []string{`CAP_ARGS={"io.kubernetes.cri.pod-annotations":{"k8s.v1.cni.cncf.io/networks":"net-a","kubernetes.io/config.source":"api"}}`}
	before := harness.HostVeths(t)
	w.Add(c)
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0", "net1"}) {
		t.Errorf("interfaces %v, want eth0 and net1 from the runtime's selection", got)
	}
	w.Del(c)
	w.AssertDetached(c, before)
}
