package explain

import (
	"context"
	"fmt"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/push"
	"github.com/plexus-cni/plexus/policies/revision"
)

// DefaultPolicyObject is the AttachmentPolicy deploy/'s nodes follow.
const DefaultPolicyObject = "cluster"

// loadPolicyObject decides as the nodes do when no --policy files are
// given and the pod comes from a cluster: with the AttachmentPolicy named
// opts.PolicyObject beside the rule library built into this binary, or,
// while no such object exists, the baseline nodes fall back to. What
// each node has activated is in its status entry (--node); the report
// names the revision evaluated here so the two can be compared. Without
// an object name or a cluster, there is no policy.
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

// compileObject compiles the library with obj's files, verified as a
// node verifies a revision (strict compile, its tests, a sample decision
// within the default deadline), or with the baseline when obj is nil.
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
	if err != nil {
		p.Error = err.Error()
		return
	}
	if obj == nil {
		b.engine, err = policies.New(ctx, policies.Config{Paths: []string{library, baseline}})
		if err != nil {
			p.Error = err.Error()
			b.problem("policy: the built-in baseline: %v", err)
		}
		return
	}
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
