package kubeenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
)

// TestPolicyObjectThinInstaller runs the thin-mode installer
// (plexusctl install --policy-object) as node-t's ServiceAccount against a
// real API server: the plugin's config names the library copy and the
// active revision; the baseline is in force until the admin creates the
// object; then the node activates it, reports it, and the files the plugin
// loads decide as the object says.
// confName is the installer's --conf-name by default.
const confName = "00-plexus.conflist"

func TestPolicyObjectThinInstaller(t *testing.T) {
	e := ForTest(t, Options{})
	ctx := t.Context()
	if err := e.Apply(ctx, false, deployFile(t, "base/crd.yaml"), deployFile(t, "base/plexus-crds.yaml"), deployFile(t, "base/rbac.yaml"), deployFile(t, "base/admission.yaml")); err != nil {
		t.Fatal(err)
	}
	saCfg, err := e.NodeServiceAccountConfig(ctx, "kube-system", "plexus", "node-t")
	if err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	src := filepath.Join(root, "image")
	if _, _, err := policies.WriteBaseline(filepath.Join(src, "policy")); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(root, "net.d")
	for _, d := range []string{filepath.Join(src, "bin"), filepath.Join(root, "bin"), conf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(src, "bin"), "plexus", "#!plexus")
	writeFile(t, conf, "10-default.conflist", `{"cniVersion":"1.0.0","name":"default","plugins":[{"type":"bridge"}]}`)
	token := writeFile(t, root, "token", saCfg.BearerToken)
	policyDir := filepath.Join(conf, "plexus.d", "policy")
	startProgram(t, filepath.Join(root, "install.log"), buildPlexusctl(t), "install",
		"--src-bin-dir", filepath.Join(src, "bin"), "--binaries", "plexus", "--cni-bin-dir", filepath.Join(root, "bin"),
		"--default-conf-dir", conf, "--cni-conf-dir", conf,
		"--kubeconfig", filepath.Join(conf, "plexus.d", "plexus.kubeconfig"), "--token-file", token, "--ca-file", e.CAFile(), "--server", e.Host(),
		"--node-name", "node-t", "--policy-src-dir", filepath.Join(src, "policy"), "--policy-dir", policyDir, "--policy-object", "cluster")

	// The plugin's policy, as its config names it.
	var paths []string
	waitFor(t, "the plugin's config", func() bool {
		raw, err := os.ReadFile(filepath.Join(conf, confName))
		if err != nil {
			return false
		}
		var list struct {
			Plugins []struct {
				Policy policies.Config `json:"policy"`
			} `json:"plugins"`
		}
		if err := json.Unmarshal(raw, &list); err != nil || len(list.Plugins) != 1 {
			t.Fatalf("plexus's config: %v\n%s", err, raw)
		}
		paths = list.Plugins[0].Policy.Paths
		return true
	})
	if want := []string{filepath.Join(policyDir, "library"), filepath.Join(policyDir, "active")}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("the plugin's policy paths %q, want %q", paths, want)
	}
	// A pod of "sample" using a network of "default": the baseline allows
	// it, the stricter object does not.
	allowed := func() bool {
		eng, err := policies.New(ctx, policies.Config{Paths: paths})
		if err != nil {
			t.Fatal(err)
		}
		req := policies.SampleRequest()
		req.Attachment.NAD.Namespace = "default"
		d, err := eng.Authorize(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	if !allowed() {
		t.Fatal("before any object, the plugin's policy refuses a network of default: want the baseline")
	}

	p := &plexusapi.AttachmentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       plexusapi.AttachmentPolicySpec{Data: map[string]string{"baseline.yaml": strictIsolation(t)}},
	}
	px, err := versioned.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := px.PlexusV1alpha1().AttachmentPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var entry plexusapi.NodePolicy
	waitFor(t, "node-t's PlexusNode to report generation 1", func() bool {
		n, err := px.PlexusV1alpha1().PlexusNodes().Get(ctx, "node-t", metav1.GetOptions{})
		if err != nil || n.Status.Policy == nil {
			return false
		}
		entry = *n.Status.Policy
		return entry.Generation == 1
	})
	if got := activeTarget(policyDir); got != entry.Revision || entry.Error != "" {
		t.Fatalf("active link %q, entry %+v: want the entry's revision active", got, entry)
	}
	if allowed() {
		t.Error("after activation the plugin's policy allows a network of default: want the object's isolation")
	}
}
