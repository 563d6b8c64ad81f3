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
}

// Ref is "namespace/name".
func (p *Pod) Ref() string { return p.Namespace + "/" + p.Name }

// PodObject is the part of a Kubernetes Pod object (API JSON or manifest)
// plexus reads; decoding only this keeps foreign fields out.
type PodObject struct {
	Metadata struct {
		Namespace   string            `json:"namespace"`
		Name        string            `json:"name"`
		UID         string            `json:"uid"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		ServiceAccountName string `json:"serviceAccountName"`
		NodeName           string `json:"nodeName"`
	} `json:"spec"`
}

// Pod converts the object.
func (o *PodObject) Pod() *Pod {
	m := o.Metadata
	return &Pod{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, Labels: m.Labels, Annotations: m.Annotations,
		ServiceAccountName: o.Spec.ServiceAccountName, NodeName: o.Spec.NodeName,
	}
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

// StatusRemover is implemented by sources whose status outlives the pod
// unless removed on DEL (the manifests source's status file).
type StatusRemover interface {
	RemoveStatus(ctx context.Context, namespace, name string) error
}

// EventType is Normal or Warning, as Kubernetes events have it.
type EventType string

const (
	EventNormal  EventType = "Normal"
	EventWarning EventType = "Warning"
)

// EventRecorder is implemented by sources that can tell the pod's owner
// what happened (Kubernetes events).
type EventRecorder interface {
	Event(ctx context.Context, pod *Pod, typ EventType, reason, message string)
}

// NamespaceLabeler is implemented by sources that know namespace labels;
// only asked for when a stage needs them (the policy input).
type NamespaceLabeler interface {
	NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error)
}

// FreshPodGetter is implemented by caching sources: FreshPod bypasses the
// cache, for when the cached pod may be stale (its UID is not the one the
// runtime names).
type FreshPodGetter interface {
	FreshPod(ctx context.Context, namespace, name string) (*Pod, error)
}
