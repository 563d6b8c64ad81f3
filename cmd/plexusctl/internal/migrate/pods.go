package migrate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/selection"
)

// PodFinding is one way plexus would treat a pod differently from Multus.
type PodFinding struct {
	Pod    string // namespace/name
	Reason string
}

// ListPods reads every pod of the cluster, a page at a time.
func ListPods(ctx context.Context, client kubernetes.Interface) ([]corev1.Pod, error) {
	var out []corev1.Pod
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := client.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// AnalyzePods checks each pod's annotations as plexus would read them with
// the migrated config, and says where the outcome differs from Multus's:
// annotations plexus refuses or reads in part (its validation is
// stricter), and pod default networks the migrated isolation policy would
// deny (Multus did not put a pod's default network to namespace
// isolation; plexus's policy decides on every network the pod chose).
func (r *Result) AnalyzePods(pods []corev1.Pod) []PodFinding {
	systemNS := r.systemNamespace()
	out, _ := findings(pods, func(p *corev1.Pod) ([]string, error) { return r.podReasons(p, systemNS), nil })
	return out
}

// findings are the reasons of each pod, sorted by pod.
func findings(pods []corev1.Pod, reasons func(*corev1.Pod) ([]string, error)) ([]PodFinding, error) {
	var out []PodFinding
	for i := range pods {
		p := &pods[i]
		rs, err := reasons(p)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		for _, reason := range rs {
			out = append(out, PodFinding{Pod: p.Namespace + "/" + p.Name, Reason: reason})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pod < out[j].Pod })
	return out, nil
}

func (r *Result) podReasons(p *corev1.Pod, systemNS string) []string {
	var out []string
	if v, ok := p.Annotations[selection.Annotation]; ok {
		res, err := selection.ParseWith(v, p.Namespace, config.DefaultParseOptions())
		if err != nil {
			out = append(out, fmt.Sprintf("%v: plexus attaches the default network only (with strictSelection the pod fails to start)", err))
		} else {
			out = append(out, res.Warnings...)
		}
	}
	if v, ok := p.Annotations[selection.DefaultNetworkAnnotation]; ok {
		d, err := selection.ParseDefaultNetwork(v, systemNS)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%v: plexus fails the pod's ADD rather than start it on another default network", err))
		case !r.isolationAllows(p.Namespace, d.Namespace):
			out = append(out, fmt.Sprintf("%s %s: the namespace_isolation policy decides on a pod's default network too, and would deny %s (namespace %q is neither the pod's nor global); list it in global_namespaces", selection.DefaultNetworkAnnotation, v, d.Ref(), d.Namespace))
		}
	}
	return out
}

// systemNamespace is where the migrated config looks for NADs named
// without a namespace, such as a pod's default network.
func (r *Result) systemNamespace() string {
	s, _ := r.Config["systemNamespace"].(string)
	return cmp.Or(s, config.DefaultSystemNamespace)
}

// isolationAllows is the migrated namespace_isolation rule.
func (r *Result) isolationAllows(podNS, nadNS string) bool {
	if r.Policy == nil || podNS == nadNS {
		return true
	}
	cfg := r.Policy["plexus"].(map[string]any)["config"].(map[string]any)["namespace_isolation"].(map[string]any)
	return slices.Contains(cfg["global_namespaces"].([]string), nadNS)
}

// PodReport lists the findings, one a line.
func PodReport(findings []PodFinding, podCount int) string {
	return listFindings(fmt.Sprintf("pods: %d checked, %d finding(s)\n", podCount, len(findings)), findings)
}

// listFindings is head, then one line per finding.
func listFindings(head string, findings []PodFinding) string {
	for _, f := range findings {
		head += fmt.Sprintf("pod %s: %s\n", f.Pod, f.Reason)
	}
	return head
}
