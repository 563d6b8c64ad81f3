package explain

import (
	"context"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/policies"
)

// NoPolicyNote is said when no --policy is given.
const NoPolicyNote = "no policy given: plexus allows every attachment when none is configured"

// loadPolicy compiles the policy once, as plexus does at start (s7.4).
func (b *builder) loadPolicy(ctx context.Context) {
	p := &b.r.Policy
	if len(b.opts.Policies) == 0 {
		b.loadPolicyObject(ctx)
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

// decision is the s7.4 policy's answer for an attachment, as the plan
// asked it (the pipeline's own Authorize call, so the same input).
func (b *builder) decision(a *pipeline.Planned) *Decision {
	switch {
	case !b.r.Policy.Given:
		return &Decision{Allowed: true, Note: NoPolicyNote}
	case b.engine == nil:
		return &Decision{Note: "the policy did not compile"}
	case a.Decision != nil:
		out := &Decision{Evaluated: true, Allowed: a.Decision.Allowed}
		for _, r := range a.Decision.Reasons {
			out.Reasons = append(out.Reasons, Reason{Code: r.Code, Message: r.Message})
		}
		return out
	case !a.Origin.ChosenByPod():
		return &Decision{Allowed: true, Note: "not asked: the admin chose this network; the policy decides on the pod's choices (s7.4)"}
	}
	return &Decision{Note: "not asked: the network fails before the policy decides"}
}
