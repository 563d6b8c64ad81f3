package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/tests/harness"
)

// assertNodeReported: the node's plexus (mode thick or thin) wrote its
// PlexusNode (config installed, the default network named, no plugin
// missing), and explain --node reports it.
func assertNodeReported(n *Node, d *Deployment, mode string) {
	t := n.t
	t.Helper()
	var st plexusapi.PlexusNodeStatus
	d.waitFor(t, "PlexusNode "+n.Name+" with plexus's config installed", func(ctx context.Context) (bool, string) {
		pn, err := getPlexusNode(ctx, n.Dyn, n.Name)
		if apierrors.IsNotFound(err) {
			return false, "no PlexusNode yet"
		}
		if err != nil {
			return false, err.Error()
		}
		st = pn.Status
		return st.ConfigInstalled && st.DefaultNetwork != "", fmt.Sprintf("status %+v", st)
	})
	if st.Mode != mode || st.DefaultNetwork != DefaultNetwork || filepath.Base(st.ConfigPath) != "00-plexus.conflist" ||
		filepath.Base(st.DefaultNetworkFile) != "10-default.conflist" || len(st.MissingPlugins) != 0 || st.Version == "" {
		t.Errorf("PlexusNode %s status %+v, want %s, config 00-plexus.conflist, default network %s in 10-default.conflist, no missing plugin", n.Name, st, mode, DefaultNetwork)
	}
	pod := filepath.Join(t.TempDir(), "pod.yaml")
	harness.Must(t, os.WriteFile(pod, []byte("kind: Pod\nmetadata:\n  namespace: default\n  name: probe\n"), 0o600))
	// The plexus pod's readiness comes from kubelet's probe, a few
	// seconds after the config is installed: wait for explain to see it.
	ctl := buildPlexusctl(t)
	var out string
	d.waitFor(t, "explain --node "+n.Name+" with no problem", func(ctx context.Context) (bool, string) {
		cmd := exec.CommandContext(ctx, ctl, "explain", "pod", "-f", pod, "--node", n.Name, "--kubeconfig", n.Kubeconfig, "--policy-object", "")
		b, err := cmd.CombinedOutput()
		out = string(b)
		return err == nil, fmt.Sprintf("%v: %s", err, b)
	})
	for _, want := range []string{
		"PlexusNode " + n.Name + ": " + mode + " mode",
		"config installed: ",
		"default network: " + DefaultNetwork + " (",
		"plugins: none missing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain --node %s lacks %q:\n%s", n.Name, want, out)
		}
	}
	// The node's writes so far, on this node's own API server: the first
	// report (a status apply finding no object, the apply creating it,
	// the status apply again) and one per change since (the default
	// network's config appeared); none for the ADDs whose delegates are
	// all present.
	counts, err := n.Env.RequestCounts(t.Context())
	harness.Must(t, err)
	creates, statuses := counts["APPLY plexusnodes"], counts["APPLY plexusnodes status"]
	t.Logf("PlexusNode requests since the install: %v apply, %v status apply", creates, statuses)
	if creates != 1 || statuses < 2 || statuses > 3 {
		t.Errorf("PlexusNode requests: %v apply (want 1), %v status apply (want 2 or 3)", creates, statuses)
	}
}
