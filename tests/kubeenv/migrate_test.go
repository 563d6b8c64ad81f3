package kubeenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// multusConf is a Multus config with namespace isolation, as the Multus
// DaemonSet's ConfigMap holds it.
const multusConf = `{"cniVersion":"0.3.1","name":"multus-cni-network","type":"multus",
  "kubeconfig":"/etc/cni/net.d/multus.d/multus.kubeconfig",
  "clusterNetwork":"/etc/cni/net.d/10-flannel.conflist",
  "namespaceIsolation":true,"globalNamespaces":"default,shared"}`

// plexusctl migrate against a real kube-apiserver: the Multus ConfigMap is
// read through --kubeconfig, and every pod whose annotations plexus would
// treat differently is listed with the reason; pods it treats alike are not.
// policyDataFile is the policy data migrate writes for namespace
// isolation, in --out.
const policyDataFile = "migrated-from-multus.yaml"

func TestMigrateReadsTheClusterAndListsPods(t *testing.T) {
	e := ForTest(t, Options{})
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"multus-system", "team-a", "team-b"} {
		if err := e.CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "multus-system", Name: "multus-cni-config"},
		Data: map[string]string{"cni-conf.json": multusConf}}
	if _, err := cs.CoreV1().ConfigMaps("multus-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := []struct {
		ns, name string
		ann      map[string]string
		want     string // "": no finding
	}{
		{"team-a", "plain", nil, ""},
		{"team-a", "selecting", map[string]string{"k8s.v1.cni.cncf.io/networks": "net-a,shared/net-b"}, ""},
		{"team-a", "invalid-name", map[string]string{"k8s.v1.cni.cncf.io/networks": "Net_A"}, "plexus attaches the default network only"},
		{"team-a", "bad-default", map[string]string{"v1.multus-cni.io/default-network": "calico@eth0"}, "plexus fails the pod's ADD"},
		{"team-b", "isolated-default", map[string]string{"v1.multus-cni.io/default-network": "kube-system/calico"}, "would deny kube-system/calico"},
		{"team-b", "own-default", map[string]string{"v1.multus-cni.io/default-network": "team-b/calico"}, ""},
	}
	for _, p := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Annotations: p.ann},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		if _, err := cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := e.Kubeconfig(kubeconfig, e.AdminConfig()); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, buildPlexusctl(t), "migrate", "--kubeconfig", kubeconfig, "--namespace", "multus-system", "--out", out)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("plexusctl migrate: %v: %s", err, stderr.String())
	}
	report := stdout.String()
	if !strings.Contains(report, "Multus config: ConfigMap multus-system/multus-cni-config, key cni-conf.json") {
		t.Errorf("report does not name the ConfigMap:\n%s", report)
	}
	wantFindings := 0
	for _, p := range pods {
		prefix := "pod " + p.ns + "/" + p.name + ": "
		line := lineWith(report, prefix)
		switch {
		case p.want == "" && line != "":
			t.Errorf("unexpected finding %q", line)
		case p.want != "" && !strings.Contains(line, p.want):
			t.Errorf("pod %s/%s: finding %q, want one with %q", p.ns, p.name, line, p.want)
		}
		if p.want != "" {
			wantFindings++
		}
	}
	// Pods of other namespaces may exist (none in a fresh apiserver); the
	// findings are exactly those above.
	if !strings.Contains(report, "finding(s)") || strings.Count(report, "\npod ") != wantFindings {
		t.Errorf("want %d findings:\n%s", wantFindings, report)
	}
	if _, err := os.ReadFile(filepath.Join(out, policyDataFile)); err != nil {
		t.Errorf("namespace isolation wrote no policy data: %v", err)
	}
}

func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
