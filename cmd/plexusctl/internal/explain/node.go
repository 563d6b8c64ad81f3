package explain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// node reports the plexus DaemonSet pod on --node, as the API shows it,
// and what the node's plexus reported of itself (PlexusNode,
// AttachmentPolicy status).
func (b *builder) node(ctx context.Context) {
	if b.opts.Node == "" {
		return
	}
	n := &Node{Name: b.opts.Node, Pods: []NodePod{}, Unavailable: []string{
		// The node-side checks explain cannot make yet: they need the
		// node's files or plexusd's socket, not the API (the node's
		// PlexusNode reports its config, default network and plugins).
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
	for _, p := range pods {
		n.Pods = append(n.Pods, nodePod(p))
	}
	b.checkNodePods(n)
	b.nodeState(ctx, n, pods)
}

func (b *builder) checkNodePods(n *Node) {
	if len(n.Pods) == 0 {
		b.problem("node %s: no plexus pod in %s: plexus is not installed or not running there (s6.1)", n.Name, PlexusNamespace)
		return
	}
	for _, p := range n.Pods {
		if !p.Ready {
			b.problem("node %s: plexus pod %s/%s is not ready (phase %s): ADDs there may wait or fail (s6.1)", n.Name, PlexusNamespace, p.Name, p.Phase)
		}
	}
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
