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
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
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

// AnalyzePods says where plexus, with the migrated config, treats a pod's
// annotations otherwise than Multus: those it refuses or reads in part,
// and pod default networks the isolation policy would deny (Multus did
// not put them to namespace isolation).
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

// listFindings is head, then one line per finding.
func listFindings(head string, findings []PodFinding) string {
	for _, f := range findings {
		head += fmt.Sprintf("pod %s: %s\n", f.Pod, f.Reason)
	}
	return head
}

// BaselineFindings puts the networks each pod chose to the baseline policy
// as plexus would on ADD (s7.4), and lists each denial's reason once per
// pod. The rules judge NAD names, never their config, so no NAD is read.
// Host-network pods (no CNI) and annotations plexus refuses (AnalyzePods
// reports those) are left out.
func (r *Result) BaselineFindings(ctx context.Context, policy pipeline.Authorizer, pods []corev1.Pod) ([]PodFinding, error) {
	systemNS := r.systemNamespace()
	return findings(pods, func(p *corev1.Pod) ([]string, error) {
		if p.Spec.HostNetwork {
			return nil, nil
		}
		return baselineReasons(ctx, policy, p, systemNS)
	})
}

// baselineReasons decides on each attachment the pod chose and returns
// the denials' reasons as "code: message", without repeats.
func baselineReasons(ctx context.Context, policy pipeline.Authorizer, p *corev1.Pod, systemNS string) ([]string, error) {
	pod := sourcePod(p)
	var els []*selection.Element
	if v, ok := p.Annotations[selection.Annotation]; ok {
		// As plexus's default config parses it ("compat": "multus").
		if res, err := selection.ParseWith(v, p.Namespace, config.DefaultParseOptions()); err == nil {
			els = res.Elements
		}
	}
	var atts []*pipeline.Attachment
	if v, ok := p.Annotations[selection.DefaultNetworkAnnotation]; ok {
		if d, err := selection.ParseDefaultNetwork(v, systemNS); err == nil {
			atts = append(atts, &pipeline.Attachment{Origin: pipeline.OriginPodDefault, Default: true,
				Name: d.Ref(), IfName: "eth0", NAD: standInNAD(d.Namespace, d.Name)})
		}
	}
	for _, el := range els {
		// The interface is the usual "net<position>" when the pod chose none.
		atts = append(atts, &pipeline.Attachment{Index: el.Index, Origin: pipeline.OriginSelection, Selection: el,
			Name: el.Ref(), IfName: cmp.Or(el.Interface, fmt.Sprintf("net%d", el.Index+1)), NAD: standInNAD(el.Namespace, el.Name)})
	}
	var out []string
	for _, a := range atts {
		d, err := policy.Authorize(ctx, &pipeline.AuthorizeRequest{Pod: pod, Attachment: a, Selections: els})
		if err != nil {
			return nil, fmt.Errorf("deciding on %s: %w", a.Name, err)
		}
		if d.Allowed {
			continue
		}
		for _, r := range d.Reasons {
			if line := r.Code + ": " + r.Message; !slices.Contains(out, line) {
				out = append(out, line)
			}
		}
	}
	return out, nil
}

// standInNAD names a NAD without its spec.
func standInNAD(ns, name string) *source.NAD {
	return &nad.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func sourcePod(p *corev1.Pod) *source.Pod {
	return &source.Pod{
		Namespace: p.Namespace, Name: p.Name, UID: string(p.UID),
		Labels: p.Labels, Annotations: p.Annotations,
		ServiceAccountName: p.Spec.ServiceAccountName, NodeName: p.Spec.NodeName,
	}
}

// BaselineReport lists the baseline's findings, one pod and reason a line.
func BaselineReport(findings []PodFinding, podCount int) string {
	pods := map[string]bool{}
	for _, f := range findings {
		pods[f.Pod] = true
	}
	return listFindings(fmt.Sprintf("baseline policy: %d pods checked, %d would be refused\n", podCount, len(pods)), findings)
}
