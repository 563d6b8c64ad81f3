// Package cached is the Kubernetes source for plexusd: informer caches of
// the node's pods (trimmed to what plexus reads) and of every NAD. A cache
// miss falls back to a direct GET; writes go through the thin source.
package cached

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
)

var (
	nadResource = schema.GroupVersionResource{Group: nad.Group, Version: nad.Version, Resource: nad.Resource}
	podResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// Source serves reads from caches and writes through kube.Source.
type Source struct {
	*kube.Source
	pods   cache.SharedIndexInformer
	nads   cache.SharedIndexInformer
	synced []cache.InformerSynced
	Misses func(kind string) // counts reads that had to go to the API
}

// New starts the informers until ctx ends; pods only of node nodeName.
func New(ctx context.Context, cfg *rest.Config, nodeName string, opts kube.Options) (*Source, error) {
	direct, err := kube.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return start(ctx, direct, dyn, nodeName)
}

// start runs the informers on dyn; direct serves cache misses and writes.
func start(ctx context.Context, direct *kube.Source, dyn dynamic.Interface, nodeName string) (*Source, error) {
	s := &Source{Source: direct, Misses: func(string) {}}
	onNode := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	s.pods = informer(dyn, podResource, onNode)
	if err := s.pods.SetTransform(trimPod); err != nil {
		return nil, err
	}
	s.nads = informer(dyn, nadResource, "")
	if err := s.nads.SetTransform(toNAD); err != nil {
		return nil, err
	}
	s.synced = []cache.InformerSynced{s.pods.HasSynced, s.nads.HasSynced}
	go s.pods.RunWithContext(ctx)
	go s.nads.RunWithContext(ctx)
	return s, nil
}

// informer caches one resource in every namespace, on the dynamic client:
// the informer factories would register every built-in API group, most of
// plexusd's start-up work, for two kinds. A client that cannot stream its
// initial list (client-go's fakes) says so, as the factories ask.
func informer(dyn dynamic.Interface, gvr schema.GroupVersionResource, fieldSelector string) cache.SharedIndexInformer {
	r := dyn.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = fieldSelector
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = fieldSelector
			return r.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, dyn), &unstructured.Unstructured{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// HasSynced reports whether both caches are filled.
func (s *Source) HasSynced() bool {
	return !slices.ContainsFunc(s.synced, func(f cache.InformerSynced) bool { return !f() })
}

// WaitForSync blocks until the caches are filled or ctx ends.
func (s *Source) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.synced...)
}

// Pod implements source.Source from the cache, falling back to a GET.
func (s *Source) Pod(ctx context.Context, namespace, name string) (*source.Pod, error) {
	if p := s.CachedPod(namespace, name); p != nil {
		return p, nil
	}
	return s.FreshPod(ctx, namespace, name)
}

// FreshPod reads the pod from the API, bypassing the cache: the cached
// pod's UID is not the runtime's (a re-created pod not seen yet).
func (s *Source) FreshPod(ctx context.Context, namespace, name string) (*source.Pod, error) {
	s.Misses("pod")
	return s.Source.Pod(ctx, namespace, name)
}

// NAD implements source.Source from the cache, falling back to a GET.
func (s *Source) NAD(ctx context.Context, namespace, name string) (*source.NAD, error) {
	obj, ok, err := s.nads.GetStore().GetByKey(namespace + "/" + name)
	if err == nil && ok {
		return obj.(*nad.NetworkAttachmentDefinition).DeepCopy(), nil
	}
	s.Misses("networkattachmentdefinition")
	return s.Source.NAD(ctx, namespace, name)
}

// trimPod keeps what plexus reads of a pod, so the cache costs little memory.
func trimPod(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone
	}
	var p corev1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, Annotations: p.Annotations,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, ServiceAccountName: p.Spec.ServiceAccountName, ResourceClaims: p.Spec.ResourceClaims},
		Status: corev1.PodStatus{ResourceClaimStatuses: p.Status.ResourceClaimStatuses},
	}, nil
}

// toNAD turns the dynamic client's object into plexus's NAD type.
func toNAD(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	var n nad.NetworkAttachmentDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	n.ManagedFields = nil
	return &n, nil
}

func podOf(p *corev1.Pod) *source.Pod {
	return &source.Pod{
		Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Labels: p.Labels, Annotations: p.Annotations,
		ServiceAccountName: p.Spec.ServiceAccountName, NodeName: p.Spec.NodeName,
		ResourceClaims: claimsOf(p),
	}
}

// OnPodChange calls f, which must not block, with the "namespace/name" of
// every pod the cache adds or whose annotation ann changes.
func (s *Source) OnPodChange(ann string, f func(key string)) error {
	_, err := s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				f(p.Namespace + "/" + p.Name)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			c, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 && o.Annotations[ann] != c.Annotations[ann] {
				f(c.Namespace + "/" + c.Name)
			}
		},
	})
	return err
}

// CachedPod is the pod from the cache only; nil when the cache has none.
func (s *Source) CachedPod(namespace, name string) *source.Pod {
	obj, ok, err := s.pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return podOf(obj.(*corev1.Pod))
}

// PodKeys lists the "namespace/name" of every cached pod.
func (s *Source) PodKeys() []string { return s.pods.GetStore().ListKeys() }

// claimsOf maps the pod's claims to their ResourceClaims, as PodObject does.
func claimsOf(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range p.Spec.ResourceClaims {
		out[c.Name] = ""
		if c.ResourceClaimName != nil {
			out[c.Name] = *c.ResourceClaimName
		}
	}
	for _, c := range p.Status.ResourceClaimStatuses {
		if c.ResourceClaimName != nil {
			out[c.Name] = *c.ResourceClaimName
		}
	}
	return out
}
