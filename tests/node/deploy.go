package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// Deployment is a kustomization of deploy/ rendered as `kubectl apply -k`
// would (krusty), then relocated onto this node's directories (see
// relocate), as applied to the node's control plane.
type Deployment struct {
	n *Node
	// Root stands for the host's / for every host path the manifests name
	// that has no directory of the node's own (see HostPath).
	Root    string
	Objects []*unstructured.Unstructured
	// DaemonSet is the kustomization's one DaemonSet (kube-system).
	DaemonSet string
	// paths map host paths onto the node's directories (HostPath).
	paths []pathMap
	// criSocket is the runtime socket's host path the agent is given
	// (CRI_SOCKET), as rendered.
	criSocket string
}

// pathMap maps a host path and everything below it to a directory.
type pathMap struct{ from, to string }

// DistributionPaths says what RenderDistribution does with the node paths
// a component of deploy/distributions sets.
type DistributionPaths int

const (
	// OnNodeDirs maps them onto the node's own directories, where the
	// runtime reads CNI configs and plugins: the component fits the node.
	OnNodeDirs DistributionPaths = iota
	// UnderRoot moves them under Root like any other host path: the
	// component names directories the node's runtime does not use.
	UnderRoot
)

// deployTimeout bounds a rollout and the installer's reaction to a change
// of the node's files; both take seconds.
const deployTimeout = 3 * time.Minute

// RenderDeploy renders the kustomization dir (relative to the module root,
// e.g. "deploy" or "deploy/thin", or absolute) for this node. The result
// is applied by Apply.
func (n *Node) RenderDeploy(t testing.TB, dir string) *Deployment {
	t.Helper()
	return n.renderDeploy(t, dir, OnNodeDirs)
}

// RenderDistribution renders base (deploy or deploy/thin) with the
// component of deploy/distributions named component, its node paths
// placed as dist says.
func (n *Node) RenderDistribution(t testing.TB, base, component string, dist DistributionPaths) *Deployment {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	harness.Must(t, err)
	dir := t.TempDir()
	// kustomize takes other kustomizations by relative path only.
	rel, err := filepath.Rel(dir, root)
	harness.Must(t, err)
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n",
		filepath.Join(rel, base), filepath.Join(rel, "deploy", "distributions", component))
	harness.Must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return n.renderDeploy(t, dir, dist)
}

func (n *Node) renderDeploy(t testing.TB, dir string, dist DistributionPaths) *Deployment {
	t.Helper()
	abs := dir
	if !filepath.IsAbs(dir) {
		var err error
		abs, err = filepath.Abs(filepath.Join("..", "..", dir))
		harness.Must(t, err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	stream, err := m.AsYaml()
	harness.Must(t, err)
	d := &Deployment{n: n, Root: filepath.Join(n.Dir, "host")}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("kustomize %s: decode: %v", dir, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "DaemonSet" {
			d.DaemonSet = obj.GetName()
		}
		d.Objects = append(d.Objects, &obj)
	}
	if d.DaemonSet == "" {
		t.Fatalf("kustomize %s: no DaemonSet", dir)
	}
	d.mapNodePaths(dist)
	harness.Must(t, d.relocate())
	harness.Must(t, d.prepareHost())
	return d
}

// HostPath is where the test node keeps what a real node keeps at the
// host path p. The manifests' host paths are the real node's; on this test
// host they would be the host's own CNI directories, which other software
// (and other tests) use. So every one is moved:
//
//   - /etc/cni/net.d to the node's ConfDir (containerd's conf_dir);
//   - /opt/cni/bin to the node's CNI bin dir (containerd's bin_dir);
//   - /var/lib/kubelet to kubelet's --root-dir;
//   - /var/run/netns to the directory containerd mounts sandbox network
//     namespaces in (netns_mounts_under_state_dir), the paths it passes in
//     CNI_NETNS;
//   - anything else (/var/lib/cni, /var/log, /run, /run/plexus) to the
//     same path under Root.
//
// A component of deploy/distributions moves the CNI dirs and kubelet's
// pod-resources dir: with OnNodeDirs its paths map the same way.
func (d *Deployment) HostPath(p string) string {
	for _, m := range d.paths {
		if p == m.from || strings.HasPrefix(p, m.from+"/") {
			return m.to + strings.TrimPrefix(p, m.from)
		}
	}
	return filepath.Join(d.Root, p)
}

// mapNodePaths sets the node paths HostPath maps: the defaults, and the
// paths the rendered agent's env and kubelet volume name where a
// component moved them (with OnNodeDirs).
func (d *Deployment) mapNodePaths(dist DistributionPaths) {
	n := d.n
	kubelet := filepath.Join(n.Dir, "kubelet")
	d.paths = []pathMap{
		{"/etc/cni/net.d", n.ConfDir},
		{"/opt/cni/bin", n.cniBinDir},
		{"/var/lib/kubelet", kubelet},
		{"/var/run/netns", n.NetnsDir()},
	}
	env, podResources := d.agent()
	d.criSocket = cmp.Or(env["CRI_SOCKET"], "/run/containerd/containerd.sock")
	if dist != OnNodeDirs {
		return
	}
	var moved []pathMap
	for _, m := range []pathMap{
		{env["CNI_CONF_DIR"], n.ConfDir},
		{env["CNI_BIN_DIR"], n.cniBinDir},
		{podResources, filepath.Join(kubelet, "pod-resources")},
	} {
		if m.from != "" && !slices.ContainsFunc(d.paths, func(p pathMap) bool { return p.from == m.from }) {
			moved = append(moved, m)
		}
	}
	d.paths = append(moved, d.paths...)
}

// agent is the rendered DaemonSet's node agent container's env values and
// its kubelet pod-resources volume's host path.
func (d *Deployment) agent() (env map[string]string, podResources string) {
	env = map[string]string{}
	for _, obj := range d.Objects {
		if obj.GetKind() != "DaemonSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			list, _ := c.(map[string]any)["env"].([]any)
			for _, e := range list {
				kv := e.(map[string]any)
				if v, ok := kv["value"].(string); ok && strings.HasPrefix(v, "/") {
					env[kv["name"].(string)] = v
				}
			}
		}
		volumes, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "volumes")
		for _, v := range volumes {
			vol := v.(map[string]any)
			if hp, ok := vol["hostPath"].(map[string]any); ok && vol["name"] == "kubelet-pod-resources" {
				podResources, _ = hp["path"].(string)
			}
		}
	}
	return env, podResources
}

// ShareRuntimeSocket makes the node's runtime socket appear where the
// manifests name the host's (plexusd's --cri-socket), through a bind
// mount that plexusd reaches through the host's root. Call it before
// Apply.
func (d *Deployment) ShareRuntimeSocket(t *testing.T) {
	t.Helper()
	target := d.HostPath(d.criSocket)
	harness.Must(t, os.MkdirAll(filepath.Dir(target), 0o755))
	harness.Must(t, os.WriteFile(target, nil, 0o600))
	if err := syscall.Mount(d.n.Socket, target, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", d.n.Socket, target, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(target, syscall.MNT_DETACH) })
}

// relocate rewrites the rendered objects for this node:
//
//   - every hostPath volume's path, and the mountPath it is mounted at (the
//     manifests mount host directories at their host paths, so that the
//     files the pod writes name paths as the host sees them), through
//     HostPath;
//   - a container's flag values naming a path in a mounted host directory
//     (--socket..., not the image's --src-bin-dir), its env values naming
//     an absolute path outside the image (CNI_CONF_DIR...), and
//     every absolute path in the installer's --config JSON (plexus's
//     config, used on the host) and in plexusd's ConfigMap JSON, at any
//     depth, the same way, but for the image's own files (/opt/plexus:
//     plexusd's policy); the thin installer's --config gets
//     cacheDir, its default /var/lib/cni/plexus relocated, since plexus
//     runs on the host and would use the host's own;
//   - KUBERNETES_SERVICE_HOST and _PORT in every container: pods reach the
//     API server through the "kubernetes" Service's ClusterIP, which only
//     kube-proxy routes, and there is none here; the pods run in the host
//     network, where the API server listens on loopback.
//
// Nothing else changes: image, command, probes, securityContext, RBAC and
// the CRD are applied as rendered.
func (d *Deployment) relocate() error {
	api, err := url.Parse(d.n.Env.Host())
	if err != nil {
		return err
	}
	for _, obj := range d.Objects {
		switch obj.GetKind() {
		case "DaemonSet":
			if err := d.relocateDaemonSet(obj, api); err != nil {
				return fmt.Errorf("relocate DaemonSet %s: %w", obj.GetName(), err)
			}
		case "ConfigMap":
			data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
			for k, v := range data {
				if strings.HasSuffix(k, ".json") {
					out, err := d.relocateJSON(v, false)
					if err != nil {
						return fmt.Errorf("relocate ConfigMap %s %s: %w", obj.GetName(), k, err)
					}
					data[k] = out
				}
			}
			if len(data) > 0 {
				if err := unstructured.SetNestedStringMap(obj.Object, data, "data"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (d *Deployment) relocateDaemonSet(obj *unstructured.Unstructured, api *url.URL) error {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
	if err != nil {
		return err
	}
	hostVolumes := map[string]bool{}
	var hostMounts []string // where host directories are mounted, as rendered
	volumes, _ := spec["volumes"].([]any)
	for _, v := range volumes {
		vol := v.(map[string]any)
		if hp, ok := vol["hostPath"].(map[string]any); ok {
			hp["path"] = d.HostPath(hp["path"].(string))
			hostVolumes[vol["name"].(string)] = true
		}
	}
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := spec[key].([]any)
		for _, c := range list {
			ctr := c.(map[string]any)
			mounts, _ := ctr["volumeMounts"].([]any)
			for _, m := range mounts {
				mount := m.(map[string]any)
				if hostVolumes[mount["name"].(string)] {
					hostMounts = append(hostMounts, mount["mountPath"].(string))
					mount["mountPath"] = d.HostPath(mount["mountPath"].(string))
				}
			}
			args, _ := ctr["args"].([]any)
			for i, a := range args {
				arg, err := d.relocateArg(a.(string), hostMounts)
				if err != nil {
					return fmt.Errorf("container %s: %w", ctr["name"], err)
				}
				args[i] = arg
			}
			env, _ := ctr["env"].([]any)
			for _, e := range env {
				// The node's paths the flags read from env ($(CNI_CONF_DIR)).
				kv := e.(map[string]any)
				if v, ok := kv["value"].(string); ok && strings.HasPrefix(v, "/") && !strings.HasPrefix(v, imageDir) {
					kv["value"] = d.HostPath(v)
				}
			}
			ctr["env"] = append(env,
				map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api.Hostname()},
				map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": api.Port()})
		}
	}
	return unstructured.SetNestedMap(obj.Object, spec, "spec", "template", "spec")
}

// relocateArg moves a flag's path value when it lies in a host directory
// the container mounts (not the image's own paths, --src-bin-dir), and
// every path in a JSON value: plexus's config, used on the host.
func (d *Deployment) relocateArg(arg string, hostMounts []string) (string, error) {
	flag, val, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasPrefix(flag, "--") {
		return arg, nil
	}
	if flag == "--delegate-root" && val == "/proc/1/root" {
		// This machine's init refuses /proc/1/root to every process; the
		// test process stands for it: same mount namespace, same root.
		return fmt.Sprintf("%s=/proc/%d/root", flag, os.Getpid()), nil
	}
	switch {
	case strings.HasPrefix(val, "/"):
		for _, m := range hostMounts {
			if val == m || strings.HasPrefix(val, m+"/") {
				return flag + "=" + d.HostPath(val), nil
			}
		}
		return arg, nil
	case strings.HasPrefix(val, "{"):
		out, err := d.relocateJSON(val, flag == "--config")
		if err != nil {
			return "", fmt.Errorf("%s: %w", flag, err)
		}
		return flag + "=" + out, nil
	}
	return arg, nil
}

// imageDir is where the image holds its own files (binaries, policy):
// paths there name the container's files, not the host's.
const imageDir = "/opt/plexus/"

// relocateJSON moves every absolute path among a JSON object's string
// values, at any depth (policy.paths), except the image's own files;
// withCacheDir adds cacheDir when it is not set (see relocate).
func (d *Deployment) relocateJSON(s string, withCacheDir bool) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return "", err
	}
	for k, v := range m {
		m[k] = d.relocateValue(v)
	}
	if _, ok := m["cacheDir"]; withCacheDir && !ok {
		m["cacheDir"] = d.HostPath("/var/lib/cni/plexus")
	}
	out, err := json.Marshal(m)
	return string(out), err
}

func (d *Deployment) relocateValue(v any) any {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "/") && !strings.HasPrefix(v, imageDir) {
			return d.HostPath(v)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = d.relocateValue(e)
		}
	case []any:
		for i, e := range v {
			v[i] = d.relocateValue(e)
		}
	}
	return v
}

// prepareHost creates what the manifests expect on a node (a hostPath of
// type Directory must exist; plexus's log directory does on every host).
// Nothing is made a shared mount: this host's / is private, as the
// install must work on such a host.
func (d *Deployment) prepareHost() error {
	for _, p := range []string{"/run", "/var/log", "/var/lib/cni"} {
		if err := os.MkdirAll(d.HostPath(p), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Apply server-side applies the relocated objects.
func (d *Deployment) Apply(t testing.TB) {
	t.Helper()
	var b strings.Builder
	for _, obj := range d.Objects {
		data, err := yaml.Marshal(obj.Object)
		harness.Must(t, err)
		b.WriteString("---\n")
		b.Write(data)
	}
	file := filepath.Join(t.TempDir(), "deploy.yaml")
	harness.Must(t, os.WriteFile(file, []byte(b.String()), 0o644))
	if err := d.n.Env.Apply(t.Context(), false, file); err != nil {
		t.Fatalf("apply the rendered deploy/: %v", err)
	}
}

// Delete deletes the applied objects as `kubectl delete -k` does (in
// reverse order, background propagation: the garbage collector deletes
// the DaemonSet's pods) and waits until the DaemonSet's pods are gone.
func (d *Deployment) Delete(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deployTimeout)
	defer cancel()
	mapper := map[string]schema.GroupVersionResource{
		"CustomResourceDefinition":         {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		"ServiceAccount":                   {Version: "v1", Resource: "serviceaccounts"},
		"ConfigMap":                        {Version: "v1", Resource: "configmaps"},
		"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		"Role":                             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		"DaemonSet":                        {Group: "apps", Version: "v1", Resource: "daemonsets"},
		"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	}
	bg := metav1.DeletePropagationBackground
	for i := len(d.Objects) - 1; i >= 0; i-- {
		obj := d.Objects[i]
		gvr, ok := mapper[obj.GetKind()]
		if !ok {
			t.Fatalf("delete %s %s: kind unknown to the test", obj.GetKind(), obj.GetName())
		}
		var err error
		if ns := obj.GetNamespace(); ns != "" {
			err = d.n.Dyn.Resource(gvr).Namespace(ns).Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
		} else {
			err = d.n.Dyn.Resource(gvr).Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	d.waitFor(t, "the DaemonSet's pods gone", func(ctx context.Context) (bool, string) {
		pods := d.pods(ctx)
		return len(pods) == 0, fmt.Sprintf("%d pods left", len(pods))
	})
}

// removeDaemonSet deletes the DaemonSet, if the test left it, and waits
// (bounded) until its pods are gone; for cleanups, whose t.Context() has
// ended.
func (d *Deployment) removeDaemonSet(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), deployTimeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	err := d.n.Client.AppsV1().DaemonSets("kube-system").Delete(ctx, d.DaemonSet, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete DaemonSet %s: %v", d.DaemonSet, err)
		return
	}
	for len(d.pods(ctx)) > 0 {
		select {
		case <-ctx.Done():
			t.Errorf("DaemonSet %s's pods still there after %s", d.DaemonSet, deployTimeout)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DeleteDaemonSet deletes the DaemonSet alone, as `kubectl -n kube-system
// delete daemonset <name>` does, and waits until its pods are gone: what
// it installed on the node stays unless its container was told to
// uninstall.
func (d *Deployment) DeleteDaemonSet(t testing.TB) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	err := d.n.Client.AppsV1().DaemonSets("kube-system").Delete(t.Context(), d.DaemonSet, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete DaemonSet %s: %v", d.DaemonSet, err)
	}
	d.waitFor(t, "the DaemonSet's pods gone", func(ctx context.Context) (bool, string) {
		pods := d.pods(ctx)
		return len(pods) == 0, fmt.Sprintf("%d pods left", len(pods))
	})
}

// pods lists the DaemonSet's pods (by its app.kubernetes.io labels).
func (d *Deployment) pods(ctx context.Context) []corev1.Pod {
	sel := "app.kubernetes.io/name=plexus"
	list, err := d.n.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && o.Name == d.DaemonSet {
				out = append(out, p)
			}
		}
	}
	return out
}

// WaitPod waits until the DaemonSet has exactly one pod, not being
// deleted, Running with every container started, whose containers run
// image (any image when ""), and returns it. A container that restarted
// fails t at once: the installer and plexusd must not crash (an OOM kill
// under the DaemonSet's memory limit shows here).
func (d *Deployment) WaitPod(t testing.TB, image string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	d.waitFor(t, "the DaemonSet's pod Running", func(ctx context.Context) (bool, string) {
		pods := d.pods(ctx)
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods))
		}
		p := pods[0]
		if p.DeletionTimestamp != nil {
			return false, "its pod " + p.Name + " is being deleted"
		}
		if p.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
		}
		for _, c := range p.Spec.Containers {
			if image != "" && c.Image != image {
				return false, fmt.Sprintf("pod %s runs %s", p.Name, c.Image)
			}
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.RestartCount > 0 {
				t.Fatalf("container %s of pod %s restarted %d times, last %+v\n%s",
					cs.Name, p.Name, cs.RestartCount, cs.LastTerminationState.Terminated, d.Explain())
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return false, fmt.Sprintf("container %s of pod %s not running: %+v", cs.Name, p.Name, cs.State)
			}
		}
		got = &p
		return true, ""
	})
	return got
}

// WaitExited waits for the DaemonSet's one pod to have container exit
// non-zero at least once: a program that refuses to run crash-loops, so
// the pod may be Running, Waiting or restarted when it is looked at.
func (d *Deployment) WaitExited(t testing.TB, container string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	d.waitFor(t, "container "+container+" exited non-zero", func(ctx context.Context) (bool, string) {
		pods := d.pods(ctx)
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods))
		}
		p := pods[0]
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != container {
				continue
			}
			for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if term != nil && term.ExitCode != 0 {
					got = &p
					return true, ""
				}
			}
			return false, fmt.Sprintf("container %s: %+v", container, cs.State)
		}
		return false, "pod " + p.Name + " has no status for " + container
	})
	return got
}

// WaitRollout waits as `kubectl rollout status daemonset` does: the
// controller saw the latest generation and the node's pod is updated and
// available; and then for the one pod of the new template (WaitPod).
func (d *Deployment) WaitRollout(t testing.TB, image string) *corev1.Pod {
	t.Helper()
	d.waitFor(t, "the DaemonSet rolled out", func(ctx context.Context) (bool, string) {
		ds, err := d.n.Client.AppsV1().DaemonSets("kube-system").Get(ctx, d.DaemonSet, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := ds.Status
		ok := s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled == 1 &&
			s.UpdatedNumberScheduled == 1 && s.NumberAvailable == 1
		return ok, fmt.Sprintf("generation %d, status %+v", ds.Generation, s)
	})
	return d.WaitPod(t, image)
}

// Patch patches the DaemonSet (a strategic merge patch, as kubectl set
// image and set env send).
func (d *Deployment) Patch(t testing.TB, patch string) {
	t.Helper()
	_, err := d.n.Client.AppsV1().DaemonSets("kube-system").Patch(t.Context(), d.DaemonSet,
		types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch DaemonSet %s with %s: %v", d.DaemonSet, patch, err)
	}
}

// waitFor polls cond until it holds, failing t after deployTimeout with
// cond's last word and what explains a stuck DaemonSet.
func (d *Deployment) waitFor(t testing.TB, what string, cond func(context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deployTimeout)
	defer cancel()
	var seen string // what the last check before the deadline saw
	for {
		ok, last := cond(ctx)
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: not within %s (%s)\n%s", what, deployTimeout, cmp.Or(seen, last), d.Explain())
		}
		seen = last
		time.Sleep(250 * time.Millisecond)
	}
}

// WaitPodGone waits until the pod object is deleted (not merely
// terminating).
func (d *Deployment) WaitPodGone(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	d.waitFor(t, "pod "+pod.Name+" deleted", func(ctx context.Context) (bool, string) {
		p, err := d.n.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, ""
		case err != nil:
			return false, err.Error()
		case p.UID != pod.UID:
			return true, ""
		}
		return false, "still there"
	})
}

// WaitFile waits until path exists (want true) or not (want false).
func (d *Deployment) WaitFile(t testing.TB, path string, want bool) {
	t.Helper()
	d.waitFor(t, fmt.Sprintf("%s exists=%v", path, want), func(context.Context) (bool, string) {
		_, err := os.Stat(path)
		return (err == nil) == want, fmt.Sprintf("stat: %v", err)
	})
}

// Explain is what a failure message needs: the DaemonSet's status and
// events, its pods' events and container logs (the files kubelet writes
// under its pod logs directory).
func (d *Deployment) Explain() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	ds, err := d.n.Client.AppsV1().DaemonSets("kube-system").Get(ctx, d.DaemonSet, metav1.GetOptions{})
	if err == nil {
		fmt.Fprintf(&b, "DaemonSet %s: generation %d, status %+v\n", d.DaemonSet, ds.Generation, ds.Status)
	} else {
		fmt.Fprintf(&b, "DaemonSet %s: %v\n", d.DaemonSet, err)
	}
	fmt.Fprintf(&b, "events of DaemonSet %s:\n%s", d.DaemonSet, d.n.PodEvents("kube-system", d.DaemonSet))
	for _, p := range d.pods(ctx) {
		fmt.Fprintf(&b, "pod %s: phase %s, statuses %+v %+v\nevents:\n%s", p.Name, p.Status.Phase,
			p.Status.InitContainerStatuses, p.Status.ContainerStatuses, d.n.PodEvents("kube-system", p.Name))
	}
	b.WriteString(d.n.ContainerLogs("kube-system", "plexus"))
	return b.String()
}

// ContainerLogs is the end of every container log file kubelet wrote for
// the pods of namespace whose name starts with prefix
// (<podLogsDir>/<namespace>_<name>_<uid>/<container>/<n>.log).
func (n *Node) ContainerLogs(namespace, prefix string) string {
	root := filepath.Join(n.Dir, "pod-logs")
	var files []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".log") {
			rel, _ := filepath.Rel(root, p)
			if strings.HasPrefix(rel, namespace+"_"+prefix) {
				files = append(files, p)
			}
		}
		return nil
	})
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(&b, "--- %s ---\n%s\n", rel, kubeenv.Tail(f, 30))
	}
	return b.String()
}

// WaitLog waits until a log file kubelet wrote for container of the pod
// holds substr.
func (d *Deployment) WaitLog(t testing.TB, pod *corev1.Pod, container, substr string) {
	t.Helper()
	pattern := filepath.Join(d.n.Dir, "pod-logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container, "*.log")
	d.waitFor(t, fmt.Sprintf("container %s of pod %s logs %q", container, pod.Name, substr), func(context.Context) (bool, string) {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil && bytes.Contains(data, []byte(substr)) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("log files %v", files)
	})
}
