package kubeenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
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
	t.Run("node side", func(t *testing.T) {
		explainNodes(t, e, ctl, dyn, admin, common)
	})
	// After "node side", which installs plexus's CRDs.
	t.Run("policy object", func(t *testing.T) {
		explainPolicyObject(t, ctl, dyn, kubeconfig)
	})
}

// explainPolicyObject: without --policy, explain decides as nodes do,
// with the AttachmentPolicy "cluster" beside the rule library, or with
// the baseline while that object does not exist.
func explainPolicyObject(t *testing.T, ctl string, dyn dynamic.Interface, kubeconfig string) {
	openData := strings.Replace(string(policies.BaselineData()),
		"namespace_isolation:\n      enabled: true", "namespace_isolation:\n      enabled: false", 1)
	if openData == string(policies.BaselineData()) {
		t.Fatal("the baseline's namespace_isolation switch moved; update this test")
	}
	steps := []struct {
		name string
		spec map[string]any // nil: no object
		code int
		want []string
	}{
		{"baseline until an object exists", nil, 1, []string{
			`AttachmentPolicy "cluster" not found: decided with the image's baseline, which a node enforces until an object exists`,
			"[1] team-b/red: PROBLEM denied: [namespace-isolation]",
		}},
		{"the object's data", map[string]any{"data": map[string]any{"baseline.yaml": openData}}, 0, []string{
			"from AttachmentPolicy cluster, revision 1-",
			"[1] team-b/red: allowed",
		}},
		{"a revision nodes refuse", map[string]any{"data": map[string]any{"baseline.yaml": openData}, "modules": map[string]any{"broken.rego": "package plexus.broken\n\nbad if {\n"}}, 1, []string{
			"broken.rego",
			"nodes refuse this revision and keep the one in force",
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.spec != nil {
				applyPolicyObject(t, dyn, st.spec)
			}
			out, code := runCtl(t, ctl, "explain", "pod", "team-a/cross-namespace", "--kubeconfig", kubeconfig)
			if code != st.code {
				t.Errorf("exit %d, want %d", code, st.code)
			}
			for _, w := range st.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// applyPolicyObject creates or replaces the spec of AttachmentPolicy
// "cluster".
func applyPolicyObject(t *testing.T, dyn dynamic.Interface, spec map[string]any) {
	t.Helper()
	ctx := t.Context()
	res := dyn.Resource(plexusapi.AttachmentPolicies)
	cur, err := res.Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": plexusapi.Group + "/" + plexusapi.Version, "kind": plexusapi.KindAttachmentPolicy,
			"metadata": map[string]any{"name": "cluster"}, "spec": spec,
		}}
		if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	cur.Object["spec"] = spec
	if _, err := res.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// explainNodes is "explain --node" against nodes whose plexus reported
// (PlexusNode, AttachmentPolicy status) a broken side, each with its
// diagnosis; the plexus pod on each is running and ready.
func explainNodes(t *testing.T, e *Env, ctl string, dyn dynamic.Interface, admin kubernetes.Interface, common []string) {
	ctx := t.Context()
	if err := e.Apply(ctx, false, deployFile(t, "base/plexus-crds.yaml"), deployFile(t, "base/rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := CreateNAD(ctx, dyn, "team-a", "mv", `{"cniVersion":"1.0.0","type":"macvlan","master":"eth0","ipam":{"type":"static"}}`); err != nil {
		t.Fatal(err)
	}
	pol := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": plexusapi.Group + "/" + plexusapi.Version, "kind": plexusapi.KindAttachmentPolicy,
		"metadata": map[string]any{"name": "team"}, "spec": map[string]any{"modules": map[string]any{"team.rego": "package plexus.team\n"}},
	}}
	if _, err := dyn.Resource(plexusapi.AttachmentPolicies).Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Hour).Truncate(time.Second)
	good := func(node string) plexusapi.PlexusNodeStatus {
		return plexusapi.PlexusNodeStatus{Mode: "thick", Version: "v0.1.0", ConfigInstalled: true, ConfigPath: "/etc/cni/net.d/00-plexus.conflist",
			DefaultNetwork: "pod-net", DefaultNetworkFile: "/etc/cni/net.d/10-default.conflist", Updated: metav1.NewTime(started.Add(time.Minute)),
			Policy: &plexusapi.NodePolicy{Source: "object", Object: "team", Revision: "5f3a9c0d1e2b", Since: metav1.NewTime(started),
				Generation: 1, ObservedGeneration: 1, TestsPassed: 2}}
	}
	cases := []struct {
		node, nets string
		state      func(*plexusapi.PlexusNodeStatus) // nil: no PlexusNode
		code       int
		want       []string
	}{
		{"node-good", "blue", func(*plexusapi.PlexusNodeStatus) {}, 0, []string{
			"PlexusNode node-good: thick mode, version v0.1.0",
			"config installed: /etc/cni/net.d/00-plexus.conflist",
			"default network: pod-net (/etc/cni/net.d/10-default.conflist)",
			"plugins: none missing from the bin dir",
			"policy: object team, revision 5f3a9c0d1e2b since",
			"AttachmentPolicy team (generation 1): generation 1 active since",
			"Result: ok",
		}},
		{"node-gone", "blue", nil, 0, []string{
			"PlexusNode node-gone: warning missing: plexus has not reported from this node",
			"warning node node-gone: no PlexusNode node-gone: plexus has not reported from this node: it does not run there, it is an older plexus that does not report, or its writes fail",
		}},
		{"node-noconf", "blue", func(s *plexusapi.PlexusNodeStatus) {
			s.ConfigInstalled, s.DefaultNetwork, s.DefaultNetworkFile = false, "", ""
		}, 1, []string{
			"config: PROBLEM not installed (/etc/cni/net.d/00-plexus.conflist)",
			"default network: PROBLEM not found in the conf dir",
			"PROBLEM node node-noconf: plexus's CNI config is not installed (/etc/cni/net.d/00-plexus.conflist): the default network's config was not found in the conf dir, so kubelet does not call plexus there",
		}},
		{"node-plugin", "mv", func(s *plexusapi.PlexusNodeStatus) { s.MissingPlugins = []string{"macvlan"} }, 1, []string{
			"plugin macvlan: PROBLEM missing, needed by [0] team-a/mv",
			"PROBLEM node node-plugin lacks CNI plugin macvlan in its bin dir, which [0] team-a/mv need(s): the ADD fails there",
		}},
		{"node-policy", "blue", func(s *plexusapi.PlexusNodeStatus) {
			s.Policy.ObservedGeneration, s.Policy.Error = 2, "team.rego:4: rego_parse_error: unexpected eof"
		}, 0, []string{
			"AttachmentPolicy team (generation 1): warning generation 2 refused: team.rego:4: rego_parse_error: unexpected eof; revision 5f3a9c0d1e2b stays in force",
			"warning node node-policy: policy (object team): team.rego:4: rego_parse_error: unexpected eof; revision 5f3a9c0d1e2b stays in force",
		}},
		{"node-ext", "blue", func(s *plexusapi.PlexusNodeStatus) {
			s.Extensions = []plexusapi.NodeExtension{{Name: "com.example.vlan", Path: "/opt/plexus/extensions/vlan/vlan.wasm", Error: "module exceeds memory limit"}}
		}, 0, []string{
			"extension com.example.vlan (/opt/plexus/extensions/vlan/vlan.wasm): warning failed to load: module exceeds memory limit",
			"warning node node-ext: extension com.example.vlan (/opt/plexus/extensions/vlan/vlan.wasm) failed to load: module exceeds memory limit; pods using its keys fail there",
		}},
		{"node-stale", "blue", func(s *plexusapi.PlexusNodeStatus) { s.Updated = metav1.NewTime(started.Add(-time.Hour)) }, 0, []string{
			"warning stale: plexus pod kube-system/plexusd-node-stale (container plexusd) started at",
			"the running plexus does not report (an older version), or its writes fail",
		}},
	}
	for _, c := range cases {
		runningPlexusPod(t, admin, c.node, started)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "on-" + c.node, Annotations: nets(c.nets)},
			Spec:       corev1.PodSpec{NodeName: c.node, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		if _, err := admin.CoreV1().Pods("team-a").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if c.state != nil {
			st := good(c.node)
			c.state(&st)
			putPlexusNode(t, e, c.node, st)
		}
	}
	for _, c := range cases {
		t.Run(c.node, func(t *testing.T) {
			out, code := runCtl(t, ctl, append([]string{"explain", "pod", "team-a/on-" + c.node, "--node", c.node}, common...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for _, w := range c.want {
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
		out, code := runCtl(t, ctl, append([]string{"explain", "pod", "team-a/on-node-plugin", "--node", "node-plugin", "-o", "json"}, common...)...)
		var r struct {
			Node struct {
				State struct {
					Found         bool `json:"found"`
					MissingForPod []struct {
						Plugin   string   `json:"plugin"`
						Networks []string `json:"networks"`
					} `json:"missingForPod"`
				} `json:"state"`
			} `json:"node"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("exit %d, not JSON: %v\n%s", code, err, out)
		}
		m := r.Node.State.MissingForPod
		if code != 1 || !r.Node.State.Found || len(m) != 1 || m[0].Plugin != "macvlan" || len(m[0].Networks) != 1 || m[0].Networks[0] != "[0] team-a/mv" {
			t.Errorf("exit %d, node state %+v", code, r.Node.State)
		}
	})
}

// runningPlexusPod is the plexus DaemonSet's pod on node, running and
// ready since started, as kubelet would report it.
func runningPlexusPod(t *testing.T, admin kubernetes.Interface, node string, started time.Time) {
	t.Helper()
	ctx := t.Context()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "plexusd-" + node, Labels: map[string]string{"app.kubernetes.io/name": "plexus"}},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: "plexus", Containers: []corev1.Container{{Name: "plexusd", Image: "plexus"}}},
	}
	created, err := admin.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := metav1.NewTime(started)
	created.Status = corev1.PodStatus{
		Phase:             corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "plexusd", Image: "plexus", ImageID: "plexus", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}},
	}
	if _, err := admin.CoreV1().Pods("kube-system").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// putPlexusNode writes a PlexusNode as the node's plexus would.
func putPlexusNode(t *testing.T, e *Env, node string, st plexusapi.PlexusNodeStatus) {
	t.Helper()
	cs, err := versioned.NewForConfig(e.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	api := cs.PlexusV1alpha1().PlexusNodes()
	created, err := api.Create(t.Context(), &plexusapi.PlexusNode{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = st
	if _, err := api.UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
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
func buildPlexusctl(t *testing.T) string { return buildProgram(t, "plexusctl") }

// buildProgram builds ./cmd/NAME from this tree into a temporary directory.
func buildProgram(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	return out
}

// startProgram runs bin with args in the background, its output in
// logPath, until the test ends: then SIGTERM, as kubelet stops a pod, and
// a failure if it exits non-zero. The log is shown when the test failed.
func startProgram(t *testing.T, logPath, bin string, args ...string) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: %v", filepath.Base(bin), err)
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s's log:\n%s", filepath.Base(bin), b)
		}
	})
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
