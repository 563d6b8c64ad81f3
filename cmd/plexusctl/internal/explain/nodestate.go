package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

// node reports --node's side: its plexus pods and what its plexus reported
// of itself (PlexusNode, AttachmentPolicy status).
func (b *builder) node(ctx context.Context) {
	if b.opts.Node == "" {
		return
	}
	n := &Node{Name: b.opts.Node, Pods: []NodePod{}, Unavailable: []string{
		// These need the node's files or plexusd's socket, not the API.
		"plexusd's readiness (s6.1) as the runtime sees it",
		"the node's attachment records of the pod (what DEL would undo)",
		"CNI configs in the node's conf dir, for NADs without spec.config (s3.4.1)",
		"the devices kubelet allocated to the pod (pod-resources API)",
	}}
	b.r.Node = n
	if b.opts.Cluster == nil {
		n.Error = "no kubeconfig: the node's plexus pod cannot be read"
		b.warn("node %s: %s", n.Name, n.Error)
		return
	}
	pods, err := b.opts.Cluster.nodePods(ctx, n.Name)
	if err != nil {
		n.Error = err.Error()
		b.warn("node %s: %v", n.Name, err)
		return
	}
	if len(pods) == 0 {
		b.problem("node %s: no plexus pod in %s: plexus is not installed or not running there (s6.1)", n.Name, PlexusNamespace)
	}
	for _, p := range pods {
		np := nodePod(p)
		n.Pods = append(n.Pods, np)
		if !np.Ready {
			b.problem("node %s: plexus pod %s/%s is not ready (phase %s): ADDs there may wait or fail (s6.1)", n.Name, PlexusNamespace, np.Name, np.Phase)
		}
	}
	b.nodeState(ctx, n, pods)
}

func nodePod(p corev1.Pod) NodePod {
	out := NodePod{Name: p.Name, Phase: string(p.Status.Phase), Message: p.Status.Message}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		out.Restarts += cs.RestartCount
	}
	return out
}

// plexusNode reads the node's PlexusNode; nil, nil when there is none.
func (c *Cluster) plexusNode(ctx context.Context, node string) (*plexusapi.PlexusNode, error) {
	n, err := c.Plexus.PlexusV1alpha1().PlexusNodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading PlexusNode %s: %w", node, err)
	}
	return n, nil
}

// nodeState reads the node's PlexusNode and checks it against the pod.
func (b *builder) nodeState(ctx context.Context, n *Node, pods []corev1.Pod) {
	pn, err := b.opts.Cluster.plexusNode(ctx, n.Name)
	switch {
	case err != nil:
		n.State = &NodeState{Error: err.Error()}
		b.warn("node %s: %v", n.Name, err)
		return
	case pn == nil:
		n.State = &NodeState{}
		b.warn("node %s: no PlexusNode %s: plexus has not reported from this node: it does not run there, it is an older plexus that does not report, or its writes fail (its log says why)", n.Name, n.Name)
		return
	}
	st := &pn.Status
	n.State = &NodeState{Found: true, Status: st}
	if s := stale(st, pods); s != "" {
		n.State.Stale = s
		b.warn("node %s: PlexusNode may be stale: %s", n.Name, s)
	}
	switch {
	case !st.ConfigInstalled && st.DefaultNetwork == "":
		b.problem("node %s: plexus's CNI config is not installed (%s): the default network's config was not found in the conf dir, so kubelet does not call plexus there (s6.1, s6.1.1)", n.Name, st.ConfigPath)
	case !st.ConfigInstalled:
		b.problem("node %s: plexus's CNI config is not installed (%s): kubelet does not call plexus there (s6.1)", n.Name, st.ConfigPath)
	}
	b.checkMissingPlugins(n)
	b.checkNodeEnforces(n.Name, st.Policy)
	if p := st.Policy; p != nil && p.Error != "" {
		b.warn("node %s: policy (%s): %s; %s", n.Name, policySource(p), p.Error, inForce(p.Revision))
	}
	for _, x := range st.Extensions {
		if x.Loaded {
			continue
		}
		var users []string // this pod's keys the module owns
		for _, a := range b.r.Attachments {
			for _, k := range a.Keys {
				if x.Name != "" && k.Module == x.Name {
					users = append(users, fmt.Sprintf("[%d] %s", a.Index, k.Key))
				}
			}
		}
		if len(users) > 0 {
			b.problem("node %s: extension %s (%s) failed to load: %s; this pod's keys it owns (%s) fail there", n.Name, x.Name, x.Path, x.Error, strings.Join(users, ", "))
		} else {
			b.warn("node %s: extension %s (%s) failed to load: %s; pods using its keys fail there", n.Name, x.Name, x.Path, x.Error)
		}
	}
	if pol := st.Policy; pol != nil && pol.Source == "object" && pol.Object != "" {
		b.followedPolicy(ctx, n, pol)
	}
}

// checkNodeEnforces: when explain decided with the baseline because the
// AttachmentPolicy does not exist, a node enforcing something else (a
// deleted object's revision, or nothing) must not be claimed to do so.
func (b *builder) checkNodeEnforces(node string, np *plexusapi.NodePolicy) {
	if !b.r.Policy.ObjectMissing || np == nil {
		return
	}
	switch np.Source {
	case "object":
		b.problem("node %s enforces revision %s of AttachmentPolicy %q, which no longer exists (onDelete Keep), not the baseline the decisions above used; "+
			"to return the node to the baseline, push the object again or uninstall plexus there with PLEXUS_UNINSTALL=true and install it again", node, np.Revision, np.Object)
	case "none":
		b.problem("node %s allows every attachment (AttachmentPolicy %q was deleted with onDelete AllowAll), not the baseline the decisions above used", node, b.r.Policy.Object)
	}
}

// stale says why a PlexusNode may not describe the node's plexus: none
// runs there, or the running one started after the last write.
func stale(st *plexusapi.PlexusNodeStatus, pods []corev1.Pod) string {
	if len(pods) == 0 {
		return fmt.Sprintf("no plexus pod runs on the node; this is what plexus reported last, at %s", when(st.Updated))
	}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if r := cs.State.Running; r != nil && r.StartedAt.After(st.Updated.Time.Add(time.Second)) {
				return fmt.Sprintf("plexus pod %s/%s (container %s) started at %s, after the last report at %s: the running plexus does not report (an older version), or its writes fail (its log says why)",
					p.Namespace, p.Name, cs.Name, when(r.StartedAt), when(st.Updated))
			}
		}
	}
	return ""
}

// checkMissingPlugins: a plugin the pod's networks need and the node
// lacks is a problem for this pod; other missing ones are the node's.
func (b *builder) checkMissingPlugins(n *Node) {
	needs := map[string][]string{} // plugin and IPAM types to the networks naming them
	add := func(label string, d *NAD) {
		for _, t := range slices.Concat(d.PluginTypes, d.IPAMTypes) {
			if !slices.Contains(needs[t], label) {
				needs[t] = append(needs[t], label)
			}
		}
	}
	if d := b.r.DefaultNetwork; d != nil && d.NAD != nil {
		add("default "+d.Network, d.NAD)
	}
	for _, a := range b.r.DefaultNetworks {
		add("defaultNetworks "+a.Network, &a.NAD)
	}
	for _, a := range b.r.Attachments {
		add(fmt.Sprintf("[%d] %s", a.Index, a.Network), &a.NAD)
	}
	for _, p := range n.State.Status.MissingPlugins {
		if nets := needs[p]; len(nets) > 0 {
			n.State.MissingForPod = append(n.State.MissingForPod, NeededPlugin{Plugin: p, Networks: nets})
			b.problem("node %s lacks CNI plugin %s in its bin dir, which %s need(s): the ADD fails there", n.Name, p, strings.Join(nets, ", "))
			continue
		}
		b.warn("node %s lacks CNI plugin %s in its bin dir (its default network's config, plexus's own or a network an earlier ADD there named it)", n.Name, p)
	}
}

// followedPolicy reads the AttachmentPolicy the node follows and compares
// it with what the node enforces; a refusal is reported with the node's
// state.
func (b *builder) followedPolicy(ctx context.Context, n *Node, pol *plexusapi.NodePolicy) {
	f := &FollowedPolicy{Object: pol.Object}
	n.Policy = f
	obj, err := b.opts.Cluster.Plexus.PlexusV1alpha1().AttachmentPolicies().Get(ctx, f.Object, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		f.Missing = true
	case err != nil:
		f.Error = fmt.Sprintf("reading AttachmentPolicy %s: %v", f.Object, err)
		b.warn("node %s: %s", n.Name, f.Error)
	default:
		f.Generation = obj.Generation
		if pol.Error == "" && pol.ObservedGeneration < f.Generation {
			b.warn("node %s has not yet acted on AttachmentPolicy %s generation %d (last tried %d)", n.Name, f.Object, f.Generation, pol.ObservedGeneration)
		}
	}
}

func policySource(p *plexusapi.NodePolicy) string {
	if p.Object != "" {
		return p.Source + " " + p.Object
	}
	return p.Source
}

func inForce(revision string) string {
	if revision == "" {
		return "no revision of it is in force"
	}
	return "revision " + shortRevision(revision) + " stays in force"
}

// shortRevision prints a revision whole, as nodes and push do; only an
// over-long value a node wrote is cut.
func shortRevision(r string) string {
	const max = 64
	if len(r) > max {
		return r[:max] + "..."
	}
	return r
}

func when(t metav1.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}
