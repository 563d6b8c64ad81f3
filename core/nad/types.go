// Package nad holds the NetworkAttachmentDefinition object (s3.1, s3.2) and
// turns one into the CNI configuration its delegates run with (s3.4).
package nad

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Group, Version and Resource name the CRD (s3.1).
const (
	Group    = "k8s.cni.cncf.io"
	Version  = "v1"
	Resource = "network-attachment-definitions"
	Kind     = "NetworkAttachmentDefinition"
)

// NetworkAttachmentDefinition is the s3.2 object.
type NetworkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec `json:"spec"`
}

// Spec is the s3.2 spec: an optional CNI config or config list as a JSON string.
type Spec struct {
	Config string `json:"config,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (n *NetworkAttachmentDefinition) DeepCopyObject() runtime.Object { return n.DeepCopy() }

// DeepCopy returns a copy sharing nothing with n.
func (n *NetworkAttachmentDefinition) DeepCopy() *NetworkAttachmentDefinition {
	if n == nil {
		return nil
	}
	out := &NetworkAttachmentDefinition{TypeMeta: n.TypeMeta, Spec: n.Spec}
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}
