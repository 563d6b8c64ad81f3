package node

import (
	"fmt"
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestMain runs the node tests only with PLEXUS_E2E=1 (make test sets it):
// they start containerd and kubelet on the host, need root, and change
// sysctls for their duration. The CNI spy is built into the harness's bin directory, containerd's CNI bin_dir.
func TestMain(m *testing.M) {
	if os.Getenv(kubeenv.E2EEnv) != "1" {
		fmt.Fprintf(os.Stderr, "skipping node tests (containerd + kubelet on this host): set %s=1 to run them (needs root)\n", kubeenv.E2EEnv)
		os.Exit(0)
	}
	os.Exit(harness.MainBuilding(m, "github.com/plexus-cni/plexus/tests/node/cnispy",
		"github.com/plexus-cni/plexus/tests/node/devhost", "github.com/plexus-cni/plexus/tests/node/vmrunc",
		"github.com/containernetworking/plugins/plugins/main/host-device"))
}
