package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/source"
)

// Cluster is the Kubernetes API explain reads, all three clients set: NADs
// through Dynamic (their CRD has no typed client), plexus's own kinds
// through Plexus.
type Cluster struct {
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
	Plexus  versioned.Interface
}

// nadResource is the s3.1 CRD's resource.
var nadResource = schema.GroupVersionResource{Group: nad.Group, Version: nad.Version, Resource: nad.Resource}

// pod reads the pod object and what plexus uses of it, decoded as
// plexus's Kubernetes source decodes it.
func (c *Cluster) pod(ctx context.Context, namespace, name string) (*corev1.Pod, *source.Pod, error) {
	obj, err := c.Core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, source.NotFound("Pod", namespace, name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	var o source.PodObject
	raw, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(raw, &o)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	p := o.Pod()
	p.Namespace = cmp.Or(p.Namespace, namespace)
	return obj, p, nil
}

// nad GETs one NAD (s3.4); a missing one wraps source.ErrNotFound.
func (c *Cluster) nad(ctx context.Context, namespace, name string) (*source.NAD, error) {
	u, err := c.Dynamic.Resource(nadResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, source.NotFound("NetworkAttachmentDefinition", namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading NetworkAttachmentDefinition %s/%s: %w", namespace, name, err)
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", namespace, name, err)
	}
	var n source.NAD
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("decoding NetworkAttachmentDefinition %s/%s: %w", namespace, name, err)
	}
	return &n, nil
}

// maxListedNADs bounds the NAD names one namespace listing reads.
const maxListedNADs = 500

// nadNames lists the names of the NADs in namespace (one page).
func (c *Cluster) nadNames(ctx context.Context, namespace string) ([]string, error) {
	list, err := c.Dynamic.Resource(nadResource).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: maxListedNADs})
	if err != nil {
		return nil, fmt.Errorf("listing NetworkAttachmentDefinitions in %s: %w", namespace, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, u := range list.Items {
		names = append(names, u.GetName())
	}
	return names, nil
}

// namespaceLabels are the policy input's namespace.labels; nil when the
// namespace cannot be read, as plexus leaves them unknown then.
func (c *Cluster) namespaceLabels(ctx context.Context, namespace string) map[string]string {
	ns, err := c.Core.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	if ns.Labels == nil {
		return map[string]string{}
	}
	return ns.Labels
}

// events lists the events of the pod (this incarnation, by UID); the
// filter repeats the field selector for clients that ignore it.
func (c *Cluster) events(ctx context.Context, pod *source.Pod) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.name": pod.Name}
	if pod.UID != "" {
		sel["involvedObject.uid"] = pod.UID
	}
	list, err := c.Core.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("listing events of pod %s: %w", pod.Ref(), err)
	}
	return slices.DeleteFunc(list.Items, func(e corev1.Event) bool {
		return e.InvolvedObject.Name != pod.Name || (pod.UID != "" && string(e.InvolvedObject.UID) != pod.UID)
	}), nil
}

// PlexusNamespace and PlexusPodPrefix find the plexus DaemonSet's pods
// (deploy/thin's plexus, deploy/'s plexusd).
const (
	PlexusNamespace = "kube-system"
	PlexusPodPrefix = "plexus"
	plexusNameLabel = "app.kubernetes.io/name"
)

// nodePods lists the plexus pods on a node.
func (c *Cluster) nodePods(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := c.Core.CoreV1().Pods(PlexusNamespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s pods on node %s: %w", PlexusNamespace, node, err)
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		return p.Spec.NodeName != node || (p.Labels[plexusNameLabel] != "plexus" && !strings.HasPrefix(p.Name, PlexusPodPrefix))
	}), nil
}
