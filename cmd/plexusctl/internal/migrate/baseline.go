package migrate

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// BaselineFindings puts each pod's networks to the baseline policy
// (policies.NewBaseline) as plexus would on ADD (s7.4): every selection
// element and the default network the pod chose, and lists each reason
// for a denial once per pod. The baseline's rules judge NAD names and the
// element as written, never a NAD's config, so no NAD is read: each is
// stood in for by its namespace and name. Pods on the host network are
// left out (no CNI plugin runs for them), and so are annotations plexus
// refuses, which AnalyzePods reports.
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
		atts = append(atts, selectionAttachment(el))
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

// selectionAttachment is the attachment for one element; the interface
// name is the usual "net<position>" when the pod chose none.
func selectionAttachment(el *selection.Element) *pipeline.Attachment {
	ifName := cmp.Or(el.Interface, fmt.Sprintf("net%d", el.Index+1))
	return &pipeline.Attachment{Index: el.Index, Origin: pipeline.OriginSelection, Selection: el,
		Name: el.Ref(), IfName: ifName, NAD: standInNAD(el.Namespace, el.Name)}
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
