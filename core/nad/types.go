// Package nad holds the NetworkAttachmentDefinition object (s3.1, s3.2) and
// turns one into the CNI configuration its delegates run with (s3.4).
package nad

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and Resource name the CRD (s3.1).
const (
	Group    = "k8s.cni.cncf.io"
	Version  = "v1"
	Resource = "network-attachment-definitions"
	Kind     = "NetworkAttachmentDefinition"
)

// SchemeGroupVersion is the API group version of the CRD.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

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

// NetworkAttachmentDefinitionList is a list of NADs, for informers.
type NetworkAttachmentDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkAttachmentDefinition `json:"items"`
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

// DeepCopyObject implements runtime.Object.
func (l *NetworkAttachmentDefinitionList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &NetworkAttachmentDefinitionList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]NetworkAttachmentDefinition, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopy()
	}
	return out
}

// AddToScheme registers the NAD types with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &NetworkAttachmentDefinition{}, &NetworkAttachmentDefinitionList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
