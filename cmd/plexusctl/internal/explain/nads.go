package explain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/policies"
)

// planSource is the source of explain's plan: its pod, the NADs of the
// --nad manifests, then of the cluster, each read once however many
// attachments name it, and the cluster's namespace labels. It publishes
// nothing.
type planSource struct {
	pod       *source.Pod
	manifests map[string]*nadRead // by ref, from the manifest's path
	cluster   *Cluster
	seen      map[string]*nadRead
}

// nadRead is one NAD as read, or why it could not be.
type nadRead struct {
	obj  *source.NAD
	from string // "cluster" or the manifest's path
	err  error
	why  string // err as the report says it (s3.4)
}

func newPlanSource(pod *source.Pod, files []string, cluster *Cluster) (*planSource, error) {
	s := &planSource{pod: pod, manifests: map[string]*nadRead{}, cluster: cluster, seen: map[string]*nadRead{}}
	for _, f := range files {
		nads, err := policies.ReadNADManifests(f)
		if err != nil {
			return nil, err
		}
		for _, n := range nads {
			s.manifests[n.Namespace+"/"+n.Name] = &nadRead{obj: n, from: f}
		}
	}
	return s, nil
}

func (s *planSource) Pod(_ context.Context, namespace, name string) (*source.Pod, error) {
	if namespace != s.pod.Namespace || name != s.pod.Name {
		return nil, source.NotFound("Pod", namespace, name)
	}
	return s.pod, nil
}

func (s *planSource) NAD(ctx context.Context, namespace, name string) (*source.NAD, error) {
	ref := namespace + "/" + name
	if n, ok := s.seen[ref]; ok {
		return n.obj, n.err
	}
	n := &nadRead{}
	s.seen[ref] = n
	switch m, ok := s.manifests[ref]; {
	case ok:
		n.obj, n.from = m.obj, m.from
	case s.cluster == nil:
		n.err = fmt.Errorf("%w in the --nad manifests (and no kubeconfig to read the cluster)", source.NotFound("NetworkAttachmentDefinition", namespace, name))
	default:
		n.obj, n.err = s.cluster.nad(ctx, namespace, name)
		n.from = "cluster"
	}
	switch {
	case errors.Is(n.err, source.ErrNotFound):
		n.why = "not found (s3.4): " + n.err.Error() + s.nearby(ctx, namespace, name)
	case n.err != nil:
		n.why = "cannot be read (s3.4): " + n.err.Error()
	}
	return n.obj, n.err
}

func (s *planSource) PublishStatus(context.Context, *source.Pod, []byte) error {
	return errors.New("explain publishes no network-status")
}

// NamespaceLabels are the policy input's namespace.labels; without a
// cluster they are unknown, as the manifests source leaves them.
func (s *planSource) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	if s.cluster == nil {
		return nil, errors.New("no kubeconfig to read namespace labels")
	}
	return s.cluster.namespaceLabels(ctx, namespace), nil
}

// maxShownNADs bounds the names a missing NAD's hint lists.
const maxShownNADs = 20

// nearby says, for a missing NAD, which NADs its namespace has (manifests
// and cluster) and the nearest name.
func (s *planSource) nearby(ctx context.Context, namespace, name string) string {
	var names []string
	for ref := range s.manifests {
		if ns, n, _ := strings.Cut(ref, "/"); ns == namespace {
			names = append(names, n)
		}
	}
	if s.cluster != nil {
		if listed, err := s.cluster.nadNames(ctx, namespace); err == nil {
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

// nearest is the name closest to want if it is a likely typo: at most a
// third of its length away, and 1 at least.
func nearest(want string, names []string) string {
	best, bestD := "", max(1, len(want)/3)+1
	for _, n := range names {
		if d := levenshtein.ComputeDistance(want, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// nadReport is a's NAD as read and resolved (s3.4.1, s3.4.2), with its devices.
func (b *builder) nadReport(namespace, name string, a *pipeline.Planned) NAD {
	out := NAD{Namespace: namespace, Name: name}
	n := b.src.seen[namespace+"/"+name]
	switch {
	case n == nil:
		return out // the plan did not get as far
	case n.err != nil:
		out.Error = n.why
		return out
	}
	out.Found, out.From = true, n.from
	out.ResourceName = n.obj.Annotations[pipeline.ResourceNameAnnotation]
	out.ResourceClaim = n.obj.Annotations[pipeline.ResourceClaimAnnotation]
	switch {
	case a.Err != nil && a.Err.Code == codes.NetworkNotFound:
		out.Error = "invalid config (s3.4.1): " + cause(a.Err, b.pod.Ref(), a.Name)
	case a.Err != nil && a.Err.Code == codes.Devices:
		out.DeviceError = cause(a.Err, b.pod.Ref(), a.Name)
	}
	if a.Unread != "" {
		out.ConfigSource = "node"
		b.warn("NetworkAttachmentDefinition %s has no spec.config: plexus looks for a CNI config named %q in the node's conf dir (s3.4.1), which explain cannot read", namespace+"/"+name, name)
		return out
	}
	if conf, err := netconf.Parse(a.Config); err == nil && out.Error == "" {
		out.ConfigSource, out.ConfigValid = a.ConfigSource, true
		out.CNIVersion, out.PluginTypes, out.IPAMTypes = conf.CNIVersion(), conf.PluginTypes(), conf.IPAMTypes()
	}
	return out
}

// cause is a plan error's message without the pod and network it starts with.
func cause(e *types.Error, pod, network string) string {
	msg := strings.TrimPrefix(e.Msg, "pod "+pod+": ")
	return strings.TrimPrefix(msg, "network "+network+": ")
}
