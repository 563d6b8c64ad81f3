package explain

import (
	"context"
	"fmt"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/policies"
)

// NoPolicyNote is said when no --policy is given.
const NoPolicyNote = "no policy given: plexus allows every attachment when none is configured"

// loadPolicy compiles the policy once, as plexus does at start (s7.4).
func (b *builder) loadPolicy(ctx context.Context) {
	p := &b.r.Policy
	if len(b.opts.Policies) == 0 {
		if !b.loadPolicyObject(ctx) {
			p.Note = NoPolicyNote
		}
		return
	}
	p.Given, p.Paths = true, b.opts.Policies
	e, err := policies.New(ctx, policies.Config{
		Paths: b.opts.Policies,
		// Offline there is no ADD waiting: allow the longest deadline.
		Deadline: policies.Duration(policies.MaxDeadline),
	})
	if err != nil {
		p.Error = err.Error()
		b.problem("policy: %v: plexus would not start with it", err)
		return
	}
	b.engine = e
}

// decide asks the policy about every attachment the pod chose, built as
// the pipeline builds it (the same Authorize call, so the same input).
func (b *builder) decide(ctx context.Context) {
	var labels map[string]string
	if b.engine != nil && b.engine.NeedsNamespaceLabels() && b.opts.Cluster != nil {
		labels = b.opts.Cluster.namespaceLabels(ctx, b.pod.Namespace)
	}
	if d := b.r.DefaultNetwork; d != nil && b.defaultNAD != nil {
		att := &pipeline.Attachment{
			Index: -1, Default: true, Origin: pipeline.OriginPodDefault, NAD: b.defaultNAD.obj,
			Name: d.Network, IfName: defaultRuntimeInterface, Config: b.defaultNAD.config,
		}
		d.Policy = b.decideOne(ctx, labels, att, b.defaultNAD, "default network "+d.Network)
	}
	for i := range b.r.Attachments {
		a := &b.r.Attachments[i]
		el := b.elements[i]
		c := b.checked[i]
		att := &pipeline.Attachment{
			Index: el.Index, Origin: pipeline.OriginSelection, Selection: el, NAD: c.obj,
			Name: el.Ref(), IfName: a.Interface, Config: c.config, ResourceName: c.report.ResourceName,
		}
		a.Policy = b.decideOne(ctx, labels, att, c, fmt.Sprintf("selection element %d (%s)", a.Index, a.Network))
	}
}

// decideOne makes one s7.4 decision. plexus asks only once the NAD is
// read and resolved, so a missing or broken NAD is not asked about.
func (b *builder) decideOne(ctx context.Context, labels map[string]string, att *pipeline.Attachment, c *checkedNAD, where string) *Decision {
	switch {
	case !b.r.Policy.Given:
		return &Decision{Allowed: true, Note: NoPolicyNote}
	case b.engine == nil:
		return &Decision{Note: "the policy did not compile"}
	case !c.usable():
		return &Decision{Note: "not asked: the network fails before the policy decides"}
	}
	req := &pipeline.AuthorizeRequest{Pod: b.pod, NamespaceLabels: labels, Attachment: att, Selections: b.elements}
	d, err := b.engine.Authorize(ctx, req)
	if err != nil {
		d.Allowed = false // an error is a denial (fail closed, as the pipeline)
	}
	out := &Decision{Evaluated: true, Allowed: d.Allowed}
	for _, r := range d.Reasons {
		out.Reasons = append(out.Reasons, Reason{Code: r.Code, Message: r.Message})
	}
	if !d.Allowed {
		if len(out.Reasons) == 0 {
			out.Reasons = []Reason{{Code: "policy.denied", Message: "the policy gave no reason"}}
		}
		for _, r := range out.Reasons {
			b.problem("%s: denied by policy [%s]: %s (s7.4): the ADD fails", where, r.Code, r.Message)
		}
	}
	return out
}
