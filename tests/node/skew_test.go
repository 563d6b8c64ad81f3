package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/plexus-cni/plexus/tests/harness"
)

// maxKubeletSkew is how many minor releases a kubelet may be older than
// the API server (Kubernetes' version skew policy).
const maxKubeletSkew = 3

// TestKubeletSkew checks that the node runs the kubelet it was given
// (KubeletEnv, `make test-skew`): the node registers with that binary's
// version, within the skew the API server supports, and a pod attached
// by plexus runs on it. Without KubeletEnv it checks tools/k8s's kubelet,
// which is the API server's release.
func TestKubeletSkew(t *testing.T) {
	n := startNode(t, "node-skew")
	w := n.PlexusWorld()
	n.InstallPlexus(w)

	bin, err := kubeletPath(n.binDir)
	harness.Must(t, err)
	out, err := exec.Command(bin, "--version").Output()
	harness.Must(t, err)
	// "Kubernetes v1.33.13"
	binVersion := strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes ")

	node, err := n.Client.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
	harness.Must(t, err)
	if got := node.Status.NodeInfo.KubeletVersion; got != binVersion {
		t.Fatalf("node reports kubelet %s, want %s's %s", got, filepath.Base(bin), binVersion)
	}
	server, err := n.Client.Discovery().ServerVersion()
	harness.Must(t, err)
	kv, err := version.ParseSemantic(binVersion)
	harness.Must(t, err)
	sv, err := version.ParseSemantic(server.GitVersion)
	harness.Must(t, err)
	t.Logf("kubelet %s (%s=%q), API server %s", kv, KubeletEnv, os.Getenv(KubeletEnv), sv)
	if kv.Major() != sv.Major() || kv.Minor() > sv.Minor() || sv.Minor()-kv.Minor() > maxKubeletSkew {
		t.Errorf("kubelet %s against API server %s: outside the supported skew (same major, at most %d minors older)", kv, sv, maxKubeletSkew)
	}

	podWithSelections(t, n, w, "skew")
}
