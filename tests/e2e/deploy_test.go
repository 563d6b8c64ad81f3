package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/tests/harness"
)

// manifestFiles are deploy/'s manifests, relative to deploy/: every YAML
// file except kustomizations (deploy/demo is a standalone demo, and
// deploy/extensions and deploy/distributions hold kustomize components,
// patches rather than objects, which tests/extdeploy renders and
// tests/node's TestDeployExtensions and TestDeployDistribution apply on a
// real node).
func manifestFiles(t *testing.T) []string {
	t.Helper()
	root := deployFile(t, "")
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "demo" || d.Name() == "extensions" || d.Name() == "distributions") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".yaml") && d.Name() != "kustomization.yaml" {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	harness.Must(t, err)
	sort.Strings(out)
	return out
}

// testDeployManifests: every manifest of deploy/ is accepted by a real
// kube-apiserver. The DaemonSet only by server-side dry run: nothing could
// run its pods here, but admission and validation are the real ones.
func (s *suite) testDeployManifests(t *testing.T) {
	files := manifestFiles(t)
	for _, f := range []string{"base/admission.yaml", "base/crd.yaml", "base/plexus-crds.yaml", "base/rbac.yaml", "configmap.yaml", "daemonset.yaml", "thin/daemonset.yaml"} {
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
	// the CRD and RBAC (the suite applied them), and the rest must apply
	// for real too, except the DaemonSets, whose pods nothing runs.
	for _, f := range files {
		if filepath.Base(f) == "daemonset.yaml" {
			continue
		}
		if err := s.env.Apply(t.Context(), false, deployFile(t, f)); err != nil {
			t.Errorf("apply deploy/%s: %v", f, err)
		}
	}
}

// TestKustomizationListsEveryManifest: `kubectl apply -k` of deploy/
// (thick) or deploy/thin must install everything: each kustomization lists
// every manifest of its directory, and the two modes share deploy/base.
func TestKustomizationListsEveryManifest(t *testing.T) {
	want := map[string][]string{
		"":     {"base", "configmap.yaml", "daemonset.yaml"},
		"base": {"admission.yaml", "crd.yaml", "plexus-crds.yaml", "rbac.yaml"},
		"thin": {"../base", "daemonset.yaml"},
	}
	for dir, resources := range want {
		raw, err := os.ReadFile(deployFile(t, filepath.Join(dir, "kustomization.yaml")))
		harness.Must(t, err)
		var k struct {
			APIVersion string   `json:"apiVersion"`
			Kind       string   `json:"kind"`
			Resources  []string `json:"resources"`
		}
		if err := yaml.UnmarshalStrict(raw, &k); err != nil {
			t.Fatalf("deploy/%s/kustomization.yaml: %v", dir, err)
		}
		if k.Kind != "Kustomization" || !strings.HasPrefix(k.APIVersion, "kustomize.config.k8s.io/") {
			t.Errorf("deploy/%s/kustomization.yaml is %s %s", dir, k.APIVersion, k.Kind)
		}
		listed := append([]string(nil), k.Resources...)
		sort.Strings(listed)
		if !reflect.DeepEqual(listed, resources) {
			t.Errorf("deploy/%s/kustomization.yaml resources %v, want %v", dir, listed, resources)
		}
	}
	var covered []string
	for dir, resources := range want {
		for _, r := range resources {
			if strings.HasSuffix(r, ".yaml") {
				covered = append(covered, filepath.Join(dir, r))
			}
		}
	}
	sort.Strings(covered)
	if got := manifestFiles(t); !reflect.DeepEqual(got, covered) {
		t.Errorf("manifests %v, but kustomizations cover %v", got, covered)
	}
}

// TestDaemonSetShape checks what thin mode's DaemonSet must have to
// install plexus on every node: what a dry run cannot tell.
func TestDaemonSetShape(t *testing.T) {
	raw, err := os.ReadFile(deployFile(t, "thin/daemonset.yaml"))
	harness.Must(t, err)
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatalf("deploy/thin/daemonset.yaml: %v", err)
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

// TestThickDaemonSetGivesDelegatesTheHost: plexusd runs every delegate
// chrooted to the host's / (hostPID, --delegate-root=/proc/1/root), so a
// delegate finds the host's tools and files as under the runtime; and
// deploy/ mounts each host directory plexusd itself uses at the same path
// (a config naming a host path means the same file inside), none with
// mount propagation: what the runtime mounts after plexusd starts (network
// namespaces) and its socket plexusd reaches through the host's root.
func TestThickDaemonSetGivesDelegatesTheHost(t *testing.T) {
	raw, err := os.ReadFile(deployFile(t, "daemonset.yaml"))
	harness.Must(t, err)
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatalf("deploy/daemonset.yaml: %v", err)
	}
	spec := ds.Spec.Template.Spec
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	var plexusd *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "plexusd" {
			plexusd = &spec.Containers[i]
		}
	}
	if plexusd == nil {
		t.Fatal("no plexusd container")
	}
	if !spec.HostPID || !slices.Contains(plexusd.Args, "--delegate-root=/proc/1/root") {
		t.Errorf("hostPID %v, args %v: want the host's PID namespace and --delegate-root=/proc/1/root", spec.HostPID, plexusd.Args)
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks is not false: every delegate inherits plexusd's environment, which would carry variables for each Service of the namespace")
	}
	type mount struct {
		host        string
		propagation corev1.MountPropagationMode
	}
	mounts := map[string]mount{}
	for _, m := range plexusd.VolumeMounts {
		host, ok := hostPaths[m.Name]
		if !ok {
			continue
		}
		if host != m.MountPath {
			t.Errorf("host %s is mounted at %s: configs name host paths, mount it at the same path", host, m.MountPath)
		}
		p := corev1.MountPropagationNone
		if m.MountPropagation != nil {
			p = *m.MountPropagation
		}
		mounts[m.MountPath] = mount{host: host, propagation: p}
	}
	for _, tc := range []struct {
		path        string // a path plexusd itself uses on the host
		propagation corev1.MountPropagationMode
	}{
		{"/opt/cni/bin/plexus-shim", corev1.MountPropagationNone},
		{"/etc/cni/net.d/10-flannel.conflist", corev1.MountPropagationNone},
		{"/var/lib/cni/plexus/records", corev1.MountPropagationNone},
		{"/var/run/k8s.cni.cncf.io/devinfo/dp/0000:03:00.1-device-info.json", corev1.MountPropagationNone},
		{"/var/lib/kubelet/pod-resources/kubelet.sock", corev1.MountPropagationNone},
		{"/run/plexus/plexusd.sock", corev1.MountPropagationNone},
	} {
		// The deepest mount holding the path is the one plexusd sees.
		best := ""
		for mp := range mounts {
			if (tc.path == mp || strings.HasPrefix(tc.path, mp+"/")) && len(mp) > len(best) {
				best = mp
			}
		}
		if best == "" {
			t.Errorf("%s: no hostPath mount in plexusd's container holds it", tc.path)
			continue
		}
		if got := mounts[best].propagation; got != tc.propagation {
			t.Errorf("%s: mounted through %s with propagation %s, want %s", tc.path, best, got, tc.propagation)
		}
	}
	for mp, m := range mounts {
		if m.propagation != corev1.MountPropagationNone {
			t.Errorf("%s is mounted with propagation %s: the install must not need the host's / shared", mp, m.propagation)
		}
	}
	// The ServiceAccount token is mounted under the container's /var/run:
	// the host's /run must not be mounted there.
	if m, ok := mounts["/var/run"]; ok {
		t.Errorf("host %s mounted at /var/run, where the ServiceAccount token goes", m.host)
	}
}
