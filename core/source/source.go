// Package source defines where plexus reads pods and NADs from and where it
// publishes network-status: Kubernetes (source/kube) or a directory of
// manifests (source/manifests).
package source

import (
	"context"
	"errors"
	"fmt"

	"github.com/plexus-cni/plexus/core/nad"
)

// Pod is what plexus uses of a pod.
type Pod struct {
	Namespace          string            `json:"namespace"`
	Name               string            `json:"name"`
	UID                string            `json:"uid"`
	Labels             map[string]string `json:"labels"`
	Annotations        map[string]string `json:"annotations"`
	ServiceAccountName string            `json:"serviceAccountName"`
	NodeName           string            `json:"nodeName"`
	// ResourceClaims maps the pod's claims (spec.resourceClaims) to their
	// ResourceClaims' names, "" until known (DRA); nil when the pod came
	// from the runtime.
	ResourceClaims map[string]string `json:"resourceClaims,omitempty"`
}

// Ref is "namespace/name".
func (p *Pod) Ref() string { return p.Namespace + "/" + p.Name }

// PodObject is the part of a Pod object (API JSON or manifest) plexus reads.
type PodObject struct {
	Metadata struct {
		Namespace   string            `json:"namespace"`
		Name        string            `json:"name"`
		UID         string            `json:"uid"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		ServiceAccountName string     `json:"serviceAccountName"`
		NodeName           string     `json:"nodeName"`
		ResourceClaims     []podClaim `json:"resourceClaims"`
	} `json:"spec"`
	Status struct {
		ResourceClaimStatuses []podClaim `json:"resourceClaimStatuses"`
	} `json:"status"`
}

// podClaim is a pod's spec.resourceClaims or status.resourceClaimStatuses
// entry (a template's generated claim is named in the status).
type podClaim struct {
	Name              string  `json:"name"`
	ResourceClaimName *string `json:"resourceClaimName"`
}

// Pod converts the object.
func (o *PodObject) Pod() *Pod {
	m := o.Metadata
	return &Pod{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, Labels: m.Labels, Annotations: m.Annotations,
		ServiceAccountName: o.Spec.ServiceAccountName, NodeName: o.Spec.NodeName,
		ResourceClaims: claimNames(o.Spec.ResourceClaims, o.Status.ResourceClaimStatuses),
	}
}

// claimNames maps each claim of the pod to its ResourceClaim's name; a
// template's claim not yet generated maps to "".
func claimNames(spec, status []podClaim) map[string]string {
	out := map[string]string{}
	for _, lists := range [][]podClaim{spec, status} {
		for _, c := range lists {
			if c.ResourceClaimName != nil {
				out[c.Name] = *c.ResourceClaimName
			} else if _, ok := out[c.Name]; !ok {
				out[c.Name] = ""
			}
		}
	}
	return out
}

// ResourceClaim is what plexus uses of a resource.k8s.io/v1 ResourceClaim.
type ResourceClaim struct {
	Namespace   string
	Name        string
	ReservedFor []string // pod UIDs
	Devices     []ClaimDevice
}

// ClaimDevice is one allocated device (status.allocation.devices.results)
// and the driver's status of it (status.devices), when given.
type ClaimDevice struct {
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// InterfaceName, HardwareAddress and IPs are the driver's networkData.
	InterfaceName   string   `json:"interfaceName,omitempty"`
	HardwareAddress string   `json:"hardwareAddress,omitempty"`
	IPs             []string `json:"ips,omitempty"`
}

// ResourceClaimReader is implemented by sources that read ResourceClaims.
type ResourceClaimReader interface {
	ResourceClaim(ctx context.Context, namespace, name string) (*ResourceClaim, error)
}

// NAD is a NetworkAttachmentDefinition as the source delivers it.
type NAD = nad.NetworkAttachmentDefinition

// ErrNotFound is wrapped by sources when an object does not exist.
var ErrNotFound = errors.New("not found")

// NotFound returns an error wrapping ErrNotFound that names the object.
func NotFound(kind, namespace, name string) error {
	return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, ErrNotFound)
}

// Source provides pods and NADs and takes the pod's network-status.
type Source interface {
	Pod(ctx context.Context, namespace, name string) (*Pod, error)
	NAD(ctx context.Context, namespace, name string) (*NAD, error)
	// PublishStatus records the s5 network-status document for the pod.
	PublishStatus(ctx context.Context, pod *Pod, status []byte) error
}

// StatusRemover is implemented by sources whose status outlives the pod.
type StatusRemover interface {
	RemoveStatus(ctx context.Context, namespace, name string) error
}

// EventType is Normal or Warning, as Kubernetes events have it.
type EventType string

const (
	EventNormal  EventType = "Normal"
	EventWarning EventType = "Warning"
)

// EventRecorder is implemented by sources that can record pod events.
type EventRecorder interface {
	Event(ctx context.Context, pod *Pod, typ EventType, reason, message string)
}

// NamespaceLabeler is implemented by sources that know namespace labels.
type NamespaceLabeler interface {
	NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error)
}

// FreshPodGetter is implemented by caching sources: FreshPod bypasses the
// cache, for a cached pod whose UID is not the runtime's.
type FreshPodGetter interface {
	FreshPod(ctx context.Context, namespace, name string) (*Pod, error)
}
