package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/tests/harness"
)

// manifestFiles are deploy/'s manifests: every YAML file except the
// kustomization itself (deploy/demo is a standalone demo, not a manifest).
func manifestFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(deployFile(t, "*.yaml"))
	harness.Must(t, err)
	var out []string
	for _, p := range paths {
		if filepath.Base(p) != "kustomization.yaml" {
			out = append(out, filepath.Base(p))
		}
	}
	sort.Strings(out)
	return out
}

// testDeployManifests: every manifest of deploy/ is accepted by a real
// kube-apiserver. The DaemonSet only by server-side dry run: nothing could
// run its pods here, but admission and validation are the real ones.
func (s *suite) testDeployManifests(t *testing.T) {
	files := manifestFiles(t)
	for _, f := range []string{"crd.yaml", "rbac.yaml", "daemonset.yaml"} {
		if !contains(files, f) {
			t.Errorf("deploy/%s is missing", f)
		}
	}
	for _, f := range files {
		if err := s.env.Apply(t.Context(), true, deployFile(t, f)); err != nil {
			t.Errorf("server-side dry run of deploy/%s: %v", f, err)
		}
	}
	// What can be stored is stored: applying deploy/ again is a no-op for
	// crd.yaml and rbac.yaml (the suite applied them), and the rest must
	// apply for real too, except the DaemonSet, whose pods nothing runs.
	for _, f := range files {
		if f == "daemonset.yaml" {
			continue
		}
		if err := s.env.Apply(t.Context(), false, deployFile(t, f)); err != nil {
			t.Errorf("apply deploy/%s: %v", f, err)
		}
	}
}

// TestKustomizationListsEveryManifest: `kubectl apply -k deploy/` must
// install everything deploy/ holds.
func TestKustomizationListsEveryManifest(t *testing.T) {
	raw, err := os.ReadFile(deployFile(t, "kustomization.yaml"))
	harness.Must(t, err)
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || !strings.HasPrefix(k.APIVersion, "kustomize.config.k8s.io/") {
		t.Errorf("deploy/kustomization.yaml is %s %s, want a kustomize.config.k8s.io Kustomization", k.APIVersion, k.Kind)
	}
	listed := append([]string(nil), k.Resources...)
	sort.Strings(listed)
	if want := manifestFiles(t); !reflect.DeepEqual(listed, want) {
		t.Errorf("deploy/kustomization.yaml resources %v, want every manifest of deploy/: %v", listed, want)
	}
}

// TestDaemonSetShape checks what the DaemonSet must have to install plexus
// on every node: what a dry run cannot tell.
func TestDaemonSetShape(t *testing.T) {
	raw, err := os.ReadFile(deployFile(t, "daemonset.yaml"))
	harness.Must(t, err)
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatalf("deploy/daemonset.yaml: %v", err)
	}
	spec := ds.Spec.Template.Spec
	if ds.Namespace != "kube-system" || spec.ServiceAccountName != "plexus" || !spec.HostNetwork {
		t.Errorf("namespace %q serviceAccountName %q hostNetwork %v, want kube-system, plexus, true", ds.Namespace, spec.ServiceAccountName, spec.HostNetwork)
	}
	// The node's network is not ready without plexus: tolerate every taint.
	if !reflect.DeepEqual(spec.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}) {
		t.Errorf("tolerations %+v, want one {operator: Exists}", spec.Tolerations)
	}
	hostPaths := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.HostPath.Path] = true
		}
	}
	for _, p := range []string{"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/cni"} {
		if !hostPaths[p] {
			t.Errorf("no hostPath volume for %s (have %v)", p, hostPaths)
		}
	}
	if len(spec.Containers) == 0 {
		t.Fatal("no containers")
	}
	c := spec.Containers[0]
	if !strings.HasPrefix(c.Image, "ghcr.io/plexus-cni/plexus:") {
		t.Errorf("image %q, want ghcr.io/plexus-cni/plexus:<version>", c.Image)
	}
	if len(c.Command) < 2 || filepath.Base(c.Command[0]) != "plexusctl" || c.Command[1] != "install" {
		t.Errorf("command %v, want plexusctl install ...", c.Command)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
