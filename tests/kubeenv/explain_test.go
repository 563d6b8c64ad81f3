package kubeenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// TestExplainPods runs "plexusctl explain pod" against a real
// kube-apiserver: a table of broken pods, each with its diagnosis in the
// output and exit 1, and healthy ones with exit 0.
func TestExplainPods(t *testing.T) {
	e := ForTest(t, Options{})
	ctx := t.Context()
	ctl := buildPlexusctl(t)
	admin, err := kubernetes.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(ctx, false, deployFile(t, "base/crd.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		if err := e.CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	const bridge = `{"cniVersion":"1.0.0","type":"bridge","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`
	for _, n := range []struct{ ns, name, config string }{
		{"team-a", "blue", bridge},
		{"team-a", "slash", `{"cniVersion":"1.0.0","type":"x/bridge"}`},
		{"team-b", "red", bridge},
	} {
		if err := CreateNAD(ctx, dyn, n.ns, n.name, n.config); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := e.Kubeconfig(kubeconfig, e.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	isolation := writeFile(t, dir, "isolation.yaml", "plexus:\n  config:\n    namespace_isolation:\n      enabled: true\n")
	library, err := filepath.Abs(filepath.Join("..", "..", "policies", "library"))
	if err != nil {
		t.Fatal(err)
	}
	ext := writeFile(t, dir, "extensions.json", `{"unownedKeys":"fail","modules":[]}`)
	common := []string{"--kubeconfig", kubeconfig, "--policy", library, "--policy", isolation, "--extensions", ext}

	const ok = `[{"name":"pod-net","interface":"eth0","ips":["10.0.0.5"],"default":true},` +
		`{"name":"team-a/blue","interface":"net1","ips":["10.1.0.7"],"mac":"02:00:00:00:00:07","default":false}]`
	pods := []struct {
		name string
		ann  map[string]string
		code int
		want []string // lines the output must hold
	}{
		{"invalid-json", nets(`[{"name":"blue"},{"name":"red","ips":"10.0.0.1"}]`), 1, []string{
			`PROBLEM invalid (in element 1): invalid k8s.v1.cni.cncf.io/networks annotation: element 1: key "ips": must be a list of strings`,
			"plexus attaches the default network only (s4.1)",
		}},
		{"truncated-json", nets(`[{"name":"blue"},{"name":`), 1, []string{
			"PROBLEM invalid (in the annotation as a whole): invalid k8s.v1.cni.cncf.io/networks annotation: not a JSON list",
		}},
		{"missing-nad", nets("gone"), 1, []string{
			"[0] team-a/gone: PROBLEM not found (s3.4): NetworkAttachmentDefinition team-a/gone: not found",
			"[0] team-a/gone: not asked: the network fails before the policy decides",
		}},
		{"invalid-config", nets("slash"), 1, []string{
			`[0] team-a/slash: PROBLEM invalid config (s3.4.1): NetworkAttachmentDefinition team-a/slash: spec.config: CNI config: "type": plugin type "x/bridge"`,
		}},
		{"cross-namespace", nets("blue,team-b/red"), 1, []string{
			"[0] team-a/blue: allowed",
			`[1] team-b/red: PROBLEM denied: [namespace-isolation] pod team-a/cross-namespace may not use network team-b/red: namespace "team-b" is neither the pod's namespace nor a global namespace`,
		}},
		{"unowned-key", nets(`[{"name":"blue","com.example.vlan":100}]`), 1, []string{
			`[0] com.example.vlan: PROBLEM no extension owns it: the ADD fails (unownedKeys: fail)`,
		}},
		{"added", map[string]string{"k8s.v1.cni.cncf.io/networks": "blue", "k8s.v1.cni.cncf.io/network-status": ok}, 0, []string{
			"k8s.v1.cni.cncf.io/network-status (s5):",
			"pod-net on eth0, ips 10.0.0.5, default",
			"team-a/blue on net1, ips 10.1.0.7, mac 02:00:00:00:00:07",
			"Normal NetworkAttached (plexus, ",
			"Result: ok",
		}},
		{"healthy", nets(`[{"name":"blue","interface":"data0","ips":["10.1.0.9/24"]}]`), 0, []string{
			"[0] team-a/blue on data0 (requested), ips 10.1.0.9/24",
			"[0] team-a/blue: found (cluster), config from spec.config is valid: plugins bridge, ipam host-local, cniVersion 1.0.0",
			"[0] team-a/blue: allowed",
			"Result: ok, the pod would get every network it asks for",
		}},
	}
	for _, p := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: p.name, Annotations: p.ann},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		created, err := admin.CoreV1().Pods("team-a").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.name == "added" {
			recordEvent(t, admin, created, "NetworkAttached", "attached team-a/blue on net1")
		}
	}
	for _, p := range pods {
		t.Run(p.name, func(t *testing.T) {
			out, code := runCtl(t, ctl, append([]string{"explain", "pod", "team-a/" + p.name}, common...)...)
			if code != p.code {
				t.Errorf("exit %d, want %d", code, p.code)
			}
			for _, w := range p.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		out, code := runCtl(t, ctl, append([]string{"explain", "pod", "team-a/missing-nad", "-o", "json"}, common...)...)
		if code != 1 || !strings.Contains(out, `"ok": false`) || !strings.Contains(out, `"found": false`) {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("no such pod", func(t *testing.T) {
		out, code := runCtl(t, ctl, "explain", "pod", "team-a/nope", "--kubeconfig", kubeconfig)
		if code != 1 || !strings.Contains(out, "Pod team-a/nope: not found") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("manifest", func(t *testing.T) {
		// -f reads the pod from a file and its NADs from the cluster.
		pod := writeFile(t, dir, "pod.yaml", "kind: Pod\nmetadata:\n  namespace: team-b\n  name: new\n  annotations:\n    k8s.v1.cni.cncf.io/networks: red,team-a/blue\n")
		out, code := runCtl(t, ctl, append([]string{"explain", "pod", "-f", pod}, common...)...)
		if code != 1 || !strings.Contains(out, "[0] team-b/red: allowed") || !strings.Contains(out, "[1] team-a/blue: PROBLEM denied: [namespace-isolation]") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("node", func(t *testing.T) {
		out, code := runCtl(t, ctl, "explain", "pod", "team-a/healthy", "--kubeconfig", kubeconfig, "--node", "node-1")
		if code != 1 || !strings.Contains(out, "PROBLEM no plexus pod in kube-system on this node") || !strings.Contains(out, "not available yet") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
}

func nets(v string) map[string]string { return map[string]string{"k8s.v1.cni.cncf.io/networks": v} }

// recordEvent writes an event as plexus's Kubernetes source does.
func recordEvent(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, reason, msg string) {
	t.Helper()
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Type:           corev1.EventTypeNormal, Reason: reason, Message: msg,
		Source:         corev1.EventSource{Component: "plexus", Host: pod.Spec.NodeName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if _, err := cs.CoreV1().Events(pod.Namespace).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// buildPlexusctl builds the command under test from this tree: the one
// in PLEXUS_BIN may predate it.
func buildPlexusctl(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plexusctl")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "./cmd/plexusctl")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building plexusctl: %v\n%s", err, b)
	}
	return out
}

// runCtl runs plexusctl and returns stdout and stderr together, and the
// exit code.
func runCtl(t *testing.T, ctl string, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(t.Context(), ctl, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("running plexusctl: %v", err)
	return "", -1
}
