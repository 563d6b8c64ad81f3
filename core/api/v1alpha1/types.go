// Package v1alpha1 holds plexus's own Kubernetes kinds (group plexus.io,
// version v1alpha1), both cluster-scoped:
//
//   - AttachmentPolicy: the admin's s7.4 policy as an object: Rego modules
//     and data documents that plexusd (thick) or the installer (thin)
//     verifies and activates on every node, each node reporting the
//     revision it enforces in the object's status.
//   - PlexusNode: one per node, named after it, written by that node's
//     plexusd or installer: what the node has installed and enforces, for
//     `plexusctl explain --node` and kubectl.
//
// The types convert to and from unstructured objects, so callers use
// client-go's dynamic client and informers; nothing here is generated.
package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of plexus's kinds.
// PodConditionNetworkAttachments is the pod condition plexusd sets once it
// has changed a running pod's attachments, or failed to: True with what it
// did, False with why not. plexusctl explain reads it.
const PodConditionNetworkAttachments = "plexus.io/NetworkAttachments"

const (
	Group   = "plexus.io"
	Version = "v1alpha1"
)

// Resources, as the dynamic client names them.
var (
	AttachmentPolicies = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "attachmentpolicies"}
	PlexusNodes        = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "plexusnodes"}
)

// Kinds.
const (
	KindAttachmentPolicy = "AttachmentPolicy"
	KindPlexusNode       = "PlexusNode"
)

// What a node does when the AttachmentPolicy it follows is deleted.
const (
	// OnDeleteKeep keeps the last activated policy in force (the default):
	// deleting an object by mistake must not open every network.
	OnDeleteKeep = "Keep"
	// OnDeleteAllowAll drops the policy: every attachment is allowed.
	OnDeleteAllowAll = "AllowAll"
)

// AttachmentPolicy is the s7.4 policy as a Kubernetes object. A node loads
// its modules and data next to the rule library in plexus's image, as if
// they were files named by the map keys in one directory.
type AttachmentPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AttachmentPolicySpec   `json:"spec"`
	Status AttachmentPolicyStatus `json:"status,omitempty"`
}

// AttachmentPolicySpec is what the admin writes.
type AttachmentPolicySpec struct {
	// Modules are Rego source files, by file name ("team.rego"). Files
	// ending in _test.rego are the bundle's tests: a node runs them before
	// activating the revision and refuses it if one fails.
	Modules map[string]string `json:"modules,omitempty"`
	// Data are data documents, by file name ("baseline.yaml", "x.json"),
	// merged into data as the loader merges files.
	Data map[string]string `json:"data,omitempty"`
	// OnDelete is OnDeleteKeep (empty) or OnDeleteAllowAll.
	OnDelete string `json:"onDelete,omitempty"`
}

// AttachmentPolicyStatus holds one entry per node; each node writes only
// its own (server-side apply, list keyed by node).
type AttachmentPolicyStatus struct {
	Nodes []NodePolicyStatus `json:"nodes,omitempty"`
}

// NodePolicyStatus is what one node enforces.
type NodePolicyStatus struct {
	Node string `json:"node"`
	// ActiveGeneration and ActiveRevision name the revision in force:
	// the object's generation and a digest of its modules and data.
	ActiveGeneration int64       `json:"activeGeneration,omitempty"`
	ActiveRevision   string      `json:"activeRevision,omitempty"`
	ActiveSince      metav1.Time `json:"activeSince,omitempty"`
	// ObservedGeneration is the last generation the node tried; Error
	// says why it refused it (empty when it is the one in force).
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Error              string `json:"error,omitempty"`
	// TestsPassed counts the bundle's Rego tests the active revision passed.
	TestsPassed int `json:"testsPassed,omitempty"`
}

// PlexusNode reports one node's plexus; its name is the node's.
type PlexusNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status PlexusNodeStatus `json:"status,omitempty"`
}

// PlexusNodeStatus is what the node's plexusd or installer last saw.
type PlexusNodeStatus struct {
	// Mode is "thick" (plexusd) or "thin" (the installer).
	Mode    string `json:"mode,omitempty"`
	Version string `json:"version,omitempty"`
	// ConfigInstalled: plexus's CNI config is written (s6.1), at ConfigPath.
	ConfigInstalled bool   `json:"configInstalled"`
	ConfigPath      string `json:"configPath,omitempty"`
	// DefaultNetwork is the cluster-wide default network's name and
	// config file, empty until found (s6.1.1).
	DefaultNetwork     string `json:"defaultNetwork,omitempty"`
	DefaultNetworkFile string `json:"defaultNetworkFile,omitempty"`
	// MissingPlugins are CNI plugin types the node's configs name but
	// its bin dir lacks.
	MissingPlugins []string `json:"missingPlugins,omitempty"`
	// Policy is the node's policy in force.
	Policy *NodePolicy `json:"policy,omitempty"`
	// Extensions are the modules the node's config names.
	Extensions []NodeExtension `json:"extensions,omitempty"`
	// Updated is when the node last changed any of the above.
	Updated metav1.Time `json:"updated,omitempty"`
}

// NodePolicy names the policy a node enforces.
type NodePolicy struct {
	// Source is "object" (an AttachmentPolicy), "files" (paths in the
	// config only) or "none" (every attachment allowed).
	Source   string      `json:"source"`
	Object   string      `json:"object,omitempty"`
	Revision string      `json:"revision,omitempty"`
	Since    metav1.Time `json:"since,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// NodeExtension is one module the node's config names.
type NodeExtension struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path"`
	SHA256  string `json:"sha256,omitempty"`
	Loaded  bool   `json:"loaded"`
	Error   string `json:"error,omitempty"`
}

// FromUnstructured converts an object the dynamic client returned into
// out (a *AttachmentPolicy or *PlexusNode), checking its kind.
func FromUnstructured(u *unstructured.Unstructured, out runtime.Object) error {
	want := kindOf(out)
	if gvk := u.GroupVersionKind(); gvk.Group != Group || gvk.Kind != want {
		return fmt.Errorf("object %q is a %s, not a %s.%s", u.GetName(), gvk.GroupKind(), want, Group)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("%s %q: %w", want, u.GetName(), err)
	}
	return nil
}

// ToUnstructured converts a *AttachmentPolicy or *PlexusNode for the
// dynamic client, with its apiVersion and kind set.
func ToUnstructured(in runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(kindOf(in))
	return u, nil
}

func kindOf(o runtime.Object) string {
	switch o.(type) {
	case *AttachmentPolicy:
		return KindAttachmentPolicy
	case *PlexusNode:
		return KindPlexusNode
	}
	return fmt.Sprintf("%T", o)
}

// DeepCopyObject implements runtime.Object.
func (p *AttachmentPolicy) DeepCopyObject() runtime.Object {
	out := *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Modules = copyMap(p.Spec.Modules)
	out.Spec.Data = copyMap(p.Spec.Data)
	out.Status.Nodes = append([]NodePolicyStatus(nil), p.Status.Nodes...)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (n *PlexusNode) DeepCopyObject() runtime.Object {
	out := *n
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.MissingPlugins = append([]string(nil), n.Status.MissingPlugins...)
	out.Status.Extensions = append([]NodeExtension(nil), n.Status.Extensions...)
	if n.Status.Policy != nil {
		pol := *n.Status.Policy
		out.Status.Policy = &pol
	}
	return &out
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
