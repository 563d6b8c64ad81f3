package node

import (
	"context"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestPodOfARejectedConfigIsDeleted: a pod selecting a NAD whose delegate
// rejects its own config (a cniVersion the bridge plugin does not know)
// never gets a sandbox: each ADD fails, and the runtime's DELs of the
// failed sandbox are answered with the same rejection. Deleting the pod
// must still end: kubelet's DELs succeed, the pod leaves the API, and no
// record, lock, lease or interface stays behind.
func TestPodOfARejectedConfigIsDeleted(t *testing.T) {
	n := startNode(t, "node-rejected").With(t)
	w := n.PlexusWorld()
	n.InstallPlexus(w)
	const ns = "rejected"
	harness.Must(t, n.Env.CreateNamespace(t.Context(), ns, nil))
	bad := `{"cniVersion":"9.9.9","name":"bad","type":"bridge","bridge":"` + w.Bridge() + `",` +
		`"ipam":{"type":"host-local","subnet":"` + harness.Subnet() + `","dataDir":"` + w.IPAMDir + `"}}`
	harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, ns, "bad", bad))
	before := harness.HostVeths(t)
	n.CreatePod(n.PodSpec(ns, "pod-a", "bad"))
	ctx, cancel := context.WithTimeout(t.Context(), podTimeout)
	defer cancel()
	for n.sandboxFailure(ctx, ns, "pod-a") == "" {
		select {
		case <-ctx.Done():
			t.Fatalf("no FailedCreatePodSandBox for pod-a; events:\n%s", n.PodEvents(ns, "pod-a"))
		case <-time.After(time.Second):
		}
	}
	n.DeletePod(ns, "pod-a")
	w.AssertNoLeaks(before)
}
