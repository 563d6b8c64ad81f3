package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/policies"
)

// nadReader finds NADs in the --nad manifests, then in the cluster, each
// once however many elements name it.
type nadReader struct {
	manifests map[string]*source.NAD
	files     map[string]string // ref -> manifest path
	cluster   *Cluster
	seen      map[string]*checkedNAD
}

func newNADReader(files []string, cluster *Cluster) (*nadReader, error) {
	r := &nadReader{manifests: map[string]*source.NAD{}, files: map[string]string{}, cluster: cluster, seen: map[string]*checkedNAD{}}
	for _, f := range files {
		nads, err := policies.ReadNADManifests(f)
		if err != nil {
			return nil, err
		}
		for _, n := range nads {
			ref := n.Namespace + "/" + n.Name
			r.manifests[ref], r.files[ref] = n, f
		}
	}
	return r, nil
}

// get returns the NAD and where it came from.
func (r *nadReader) get(ctx context.Context, namespace, name string) (*source.NAD, string, error) {
	ref := namespace + "/" + name
	if n, ok := r.manifests[ref]; ok {
		return n, r.files[ref], nil
	}
	if r.cluster == nil {
		return nil, "", fmt.Errorf("%w in the --nad manifests (and no kubeconfig to read the cluster)", source.NotFound("NetworkAttachmentDefinition", namespace, name))
	}
	n, err := r.cluster.nad(ctx, namespace, name)
	return n, "cluster", err
}

// checkedNAD is a NAD with its delegate config once resolved.
type checkedNAD struct {
	report NAD
	obj    *source.NAD
	// config is the resolved delegate config (s3.4.2 applied); nil when
	// it could not be resolved here.
	config json.RawMessage
}

// usable reports whether plexus would get as far as the policy with it.
func (c *checkedNAD) usable() bool {
	return c.obj != nil && c.report.Error == "" && c.report.DeviceError == ""
}

// checkNAD reads and checks the NAD an attachment names (s3.4); where
// names the attachment in problems.
func (b *builder) checkNAD(ctx context.Context, namespace, name, where string) *checkedNAD {
	ref := namespace + "/" + name
	if c, ok := b.nads.seen[ref]; ok {
		b.repeatProblems(c, where)
		return c
	}
	c := &checkedNAD{report: NAD{Namespace: namespace, Name: name}}
	b.nads.seen[ref] = c
	n, from, err := b.nads.get(ctx, namespace, name)
	if err != nil {
		c.report.Error = notFoundText(err)
		if errors.Is(err, source.ErrNotFound) {
			c.report.Error += b.nads.nearby(ctx, namespace, name)
		}
		b.repeatProblems(c, where)
		return c
	}
	c.obj, c.report.Found, c.report.From = n, true, from
	b.resolveConfig(c)
	b.checkDevices(c)
	b.repeatProblems(c, where)
	return c
}

// maxShownNADs bounds the names a missing NAD's hint lists.
const maxShownNADs = 20

// nearby says, for a missing NAD, which NADs its namespace has (from the
// --nad manifests and the cluster), the nearest name, and that fixing the
// annotation in place is enough: the runtime retries the pod's sandbox,
// and plexus reads the annotation again each time.
func (r *nadReader) nearby(ctx context.Context, namespace, name string) string {
	var names []string
	for ref := range r.manifests {
		if ns, n, _ := strings.Cut(ref, "/"); ns == namespace {
			names = append(names, n)
		}
	}
	if r.cluster != nil && r.cluster.Dynamic != nil {
		if listed, err := r.cluster.nadNames(ctx, namespace); err == nil {
			names = append(names, listed...)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return fmt.Sprintf("; namespace %s has no NetworkAttachmentDefinition", namespace)
	}
	hint := fmt.Sprintf("; namespace %s has %s", namespace, strings.Join(names[:min(len(names), maxShownNADs)], ", "))
	if len(names) > maxShownNADs {
		hint += fmt.Sprintf(" and %d more", len(names)-maxShownNADs)
	}
	if near := nearest(name, names); near != "" {
		hint += fmt.Sprintf("; did you mean %q? Fixing the pod's annotation in place is enough: the runtime retries the sandbox and plexus reads the annotation again", near)
	}
	return hint
}

// nearest is the name closest to want by edit distance, if it is close
// enough to be a likely typo (at most a third of its length, and 1 at
// least), "" otherwise.
func nearest(want string, names []string) string {
	best, bestD := "", max(1, len(want)/3)+1
	for _, n := range names {
		if d := levenshtein.ComputeDistance(want, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// notFoundText says "not found" plainly for a missing NAD; err names it.
func notFoundText(err error) string {
	if errors.Is(err, source.ErrNotFound) {
		return "not found (s3.4): " + err.Error()
	}
	return "cannot be read (s3.4): " + err.Error()
}

// repeatProblems reports a NAD's problems for each attachment naming it.
func (b *builder) repeatProblems(c *checkedNAD, where string) {
	if c.report.Error != "" {
		b.problem("%s: %s: the ADD fails", where, c.report.Error)
	}
	if c.report.DeviceError != "" {
		b.problem("%s: %s: the ADD fails", where, c.report.DeviceError)
	}
}

// resolveConfig runs core/nad.Resolve, the pipeline's own resolution
// (s3.4.1, s3.4.2), on spec.config. A NAD without one resolves from the
// node's CNI conf dir (rules 2-3), which explain cannot read.
func (b *builder) resolveConfig(c *checkedNAD) {
	if strings.TrimSpace(c.obj.Spec.Config) == "" {
		c.report.ConfigSource = "node"
		b.warn("NetworkAttachmentDefinition %s has no spec.config: plexus looks for a CNI config named %q in the node's conf dir (s3.4.1), which explain cannot read", c.report.Ref(), c.obj.Name)
		return
	}
	r, err := nad.Resolve(c.obj, "")
	if err != nil {
		c.report.Error = "invalid config (s3.4.1): " + err.Error()
		return
	}
	conf, err := netconf.Parse(r.Config)
	if err != nil { // Resolve parsed it already
		c.report.Error = fmt.Sprintf("invalid config (s3.4.1): NetworkAttachmentDefinition %s: %v", c.report.Ref(), err)
		return
	}
	c.config = r.Config
	c.report.ConfigSource, c.report.ConfigValid = r.Source, true
	c.report.CNIVersion, c.report.PluginTypes, c.report.IPAMTypes = conf.CNIVersion(), conf.PluginTypes(), conf.IPAMTypes()
}

// checkDevices reads the devices the NAD needs and checks them as the
// pipeline does before any delegate runs.
func (b *builder) checkDevices(c *checkedNAD) {
	c.report.ResourceName = c.obj.Annotations[pipeline.ResourceNameAnnotation]
	c.report.ResourceClaim = c.obj.Annotations[pipeline.ResourceClaimAnnotation]
	_, claim, isClaim, err := pipeline.DeviceAnnotations(c.obj.Annotations)
	switch {
	case err != nil:
		c.report.DeviceError = err.Error()
	case isClaim:
		c.report.DeviceError = b.checkClaim(claim)
	}
}

// checkClaim checks a plexus.io/resource-claim value, "<claim>" or
// "<claim>/<request>", against the pod's spec.resourceClaims when known.
func (b *builder) checkClaim(ref string) string {
	podClaim, _, err := pipeline.ParseClaimRef(ref)
	if err != nil {
		return err.Error()
	}
	if b.pod.ResourceClaims == nil {
		return ""
	}
	if _, ok := b.pod.ResourceClaims[podClaim]; !ok {
		return fmt.Sprintf("the NAD's %s names claim %q, which the pod's spec.resourceClaims does not have", pipeline.ResourceClaimAnnotation, podClaim)
	}
	return ""
}

// attachments checks the NAD of every selection element.
func (b *builder) attachments(ctx context.Context) {
	b.checked = make([]*checkedNAD, len(b.r.Attachments))
	for i := range b.r.Attachments {
		a := &b.r.Attachments[i]
		where := fmt.Sprintf("selection element %d (%s)", a.Index, a.Network)
		c := b.checkNAD(ctx, a.NAD.Namespace, a.NAD.Name, where)
		a.NAD = c.report
		b.checked[i] = c
	}
}
