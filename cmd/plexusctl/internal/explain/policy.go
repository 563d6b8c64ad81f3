package explain

import (
	"context"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/push"
	"github.com/plexus-cni/plexus/policies/revision"
)

// NoPolicyNote is said when no --policy is given.
const NoPolicyNote = "no policy given: plexus allows every attachment when none is configured"

// DefaultPolicyObject is the AttachmentPolicy deploy/'s nodes follow.
const DefaultPolicyObject = "cluster"

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

// loadPolicyObject decides as the nodes do without --policy: with the
// AttachmentPolicy opts.PolicyObject and the built-in rule library, or the
// baseline while no such object exists. The report names the revision, to
// compare with what each node activated (--node).
func (b *builder) loadPolicyObject(ctx context.Context) {
	name, p := b.opts.PolicyObject, &b.r.Policy
	if name == "" || b.opts.Cluster == nil {
		p.Note = NoPolicyNote
		return
	}
	p.Given, p.Object = true, name
	obj, err := b.opts.Cluster.Plexus.PlexusV1alpha1().AttachmentPolicies().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p.ObjectMissing = true
		p.Note = fmt.Sprintf("AttachmentPolicy %q not found: decided with the image's baseline, which a node enforces until an object exists; "+
			"a node that enforced a revision of a deleted %q keeps it (onDelete Keep) until plexus is uninstalled there with PLEXUS_UNINSTALL=true: --node says which", name, name)
		b.compileObject(ctx, nil)
	case err != nil:
		p.Error = fmt.Sprintf("reading AttachmentPolicy %q: %v", name, err)
		b.problem("policy: %s", p.Error)
	default:
		b.compileObject(ctx, obj)
	}
}

// compileObject compiles the library with obj's files, verified as a node
// verifies a revision, or with the baseline when obj is nil.
func (b *builder) compileObject(ctx context.Context, obj *plexusapi.AttachmentPolicy) {
	p := &b.r.Policy
	dir, err := os.MkdirTemp("", "plexus-explain-policy-")
	if err != nil {
		p.Error = err.Error()
		return
	}
	// The engine keeps nothing of the files once compiled.
	defer os.RemoveAll(dir)
	library, baseline, err := policies.WriteBaseline(dir)
	switch {
	case err != nil:
		p.Error = err.Error()
	case obj == nil:
		if b.engine, err = policies.New(ctx, policies.Config{Paths: []string{library, baseline}}); err != nil {
			p.Error = err.Error()
			b.problem("policy: the built-in baseline: %v", err)
		}
	default:
		files, err := revision.SpecFiles(obj)
		if err == nil {
			p.Revision = revision.Revision(obj.Generation, files) // as nodes report it
			b.engine, _, err = push.Verify(ctx, library, files, "(the object)")
		}
		if err != nil {
			p.Error = fmt.Sprintf("AttachmentPolicy %q: %v", obj.Name, err)
			b.problem("policy: %s: nodes refuse this revision and keep the one in force", p.Error)
		}
	}
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
