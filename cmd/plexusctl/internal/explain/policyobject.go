package explain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

// DefaultPolicyObject is the AttachmentPolicy deploy/'s nodes follow.
const DefaultPolicyObject = "cluster"

// loadPolicyObject decides as the nodes do when no --policy files are
// given and the pod comes from a cluster: with the AttachmentPolicy named
// opts.PolicyObject beside the rule library built into this binary, or,
// while no such object exists, the baseline nodes fall back to. What
// each node has activated is in its status entry (--node); the report
// names the revision evaluated here so the two can be compared.
func (b *builder) loadPolicyObject(ctx context.Context) bool {
	name := b.opts.PolicyObject
	if name == "" || b.opts.Cluster == nil || b.opts.Cluster.Plexus == nil {
		return false
	}
	p := &b.r.Policy
	p.Given, p.Object = true, name
	obj, err := b.opts.Cluster.Plexus.PlexusV1alpha1().AttachmentPolicies().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p.ObjectMissing = true
		p.Note = fmt.Sprintf("AttachmentPolicy %q not found: decided with the image's baseline, which a node enforces until an object exists; "+
			"a node that enforced a revision of a deleted %q keeps it (onDelete Keep) until plexus is uninstalled there with PLEXUS_UNINSTALL=true: --node says which", name, name)
		b.compileObject(ctx, nil)
		return true
	case err != nil:
		p.Error = fmt.Sprintf("reading AttachmentPolicy %q: %v", name, err)
		b.problem("policy: %s", p.Error)
		return true
	}
	b.compileObject(ctx, obj)
	return true
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
	objDir := filepath.Join(dir, "object")
	files, err := writeObjectFiles(objDir, obj, &p.Revision)
	if err == nil {
		b.engine, _, err = revision.Verify(ctx, policies.Config{Paths: []string{library}}, objDir, revision.HasTests(files), objectTestTimeout)
	}
	if err != nil {
		p.Error = fmt.Sprintf("AttachmentPolicy %q: %s", obj.Name, revision.StripDir(err.Error(), objDir, "(the object)"))
		b.problem("policy: %s: nodes refuse this revision and keep the one in force", p.Error)
	}
}

// objectTestTimeout bounds an object's own tests, as plexusctl policy
// push does.
const objectTestTimeout = 30 * time.Second

// writeObjectFiles writes obj's modules and data under dir, checked as a
// node checks them, and sets *rev to the revision nodes report.
func writeObjectFiles(dir string, obj *plexusapi.AttachmentPolicy, rev *string) (map[string][]byte, error) {
	files, err := revision.SpecFiles(obj)
	if err != nil {
		return nil, err
	}
	*rev = revision.Revision(obj.Generation, files)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	for name, data := range files {
		// SpecFiles allows plain file names only.
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return files, nil
}
