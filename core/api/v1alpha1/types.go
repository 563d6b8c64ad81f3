package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PodConditionNetworkAttachments is the pod condition plexusd sets once it
// has changed a running pod's attachments, or failed to: True with what it
// did, False with why not. plexusctl explain reads it.
const PodConditionNetworkAttachments = "plexus.io/NetworkAttachments"

// Group and Version of plexus's kinds.
const (
	Group   = "plexus.io"
	Version = "v1alpha1"
)

// SchemeGroupVersion is the group and version of plexus's kinds.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Resources, as the dynamic client names them.
var (
	AttachmentPolicies = SchemeGroupVersion.WithResource("attachmentpolicies")
	PlexusNodes        = SchemeGroupVersion.WithResource("plexusnodes")
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

// AttachmentPolicy is plexus's s7.4 policy: Rego modules and data
// documents loaded on every node next to the rule library in plexus's
// image, as if they were files named by the map keys in one directory.
// Each node reports the revision it enforces in its own PlexusNode.
//
// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=apol
// +kubebuilder:printcolumn:name=Generation,type=integer,JSONPath=`.metadata.generation`
// +kubebuilder:printcolumn:name=OnDelete,type=string,JSONPath=`.spec.onDelete`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type AttachmentPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AttachmentPolicySpec `json:"spec"`
}

// AttachmentPolicySpec is what the admin writes.
type AttachmentPolicySpec struct {
	// Modules are Rego modules by file name; names ending in _test.rego
	// are the policy's tests, which a node runs before it activates the
	// revision, refusing it if one fails.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9_.-]{0,99}[.]rego$'))",message="module names are file names: lower-case letters, digits, '_', '.', '-', ending in .rego"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 262144)",message="a module holds at most 256 KiB"
	// +mapType=atomic
	Modules map[string]string `json:"modules,omitempty"`
	// Data are data documents (YAML or JSON) by file name, merged into
	// data as plexus merges data files.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z0-9][a-z0-9_.-]{0,99}[.](yaml|yml|json)$'))",message="data names are file names: lower-case letters, digits, '_', '.', '-', ending in .yaml, .yml or .json"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 262144)",message="a data document holds at most 256 KiB"
	// +mapType=atomic
	Data map[string]string `json:"data,omitempty"`
	// OnDelete is what nodes do when this object is deleted: Keep (the
	// default) keeps the last policy in force; AllowAll allows every
	// attachment.
	// +optional
	// +kubebuilder:validation:Enum=Keep;AllowAll
	OnDelete string `json:"onDelete,omitempty"`
}

// AttachmentPolicyList is a list of AttachmentPolicy.
// +kubebuilder:object:root=true
type AttachmentPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AttachmentPolicy `json:"items"`
}

// PlexusNode is what one node's plexus has installed and enforces; its
// name is the node's.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name=Mode,type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name=Policy,type=string,JSONPath=`.status.policy.object`
// +kubebuilder:printcolumn:name=Generation,type=integer,JSONPath=`.status.policy.generation`
// +kubebuilder:printcolumn:name=Revision,type=string,JSONPath=`.status.policy.revision`
// +kubebuilder:printcolumn:name=Ready,type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name=Updated,type=date,JSONPath=`.status.updated`
type PlexusNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status PlexusNodeStatus `json:"status,omitempty"`
}

// PlexusNodeList is a list of PlexusNode.
// +kubebuilder:object:root=true
type PlexusNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PlexusNode `json:"items"`
}

// Bounds the CRD sets on what a report holds: a longer error or list
// would make the API server refuse every write, so the agents truncate
// to them.
const (
	MaxExtensions = 64
	MaxErrorBytes = 4096
)

// PlexusNodeStatus is what the node's agent last saw.
type PlexusNodeStatus struct {
	// Mode is "thick" (plexusd) or "thin" (the installer).
	// +optional
	// +kubebuilder:validation:Enum=thick;thin
	Mode string `json:"mode,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// ConfigInstalled: plexus's CNI config is written (s6.1), at ConfigPath.
	ConfigInstalled bool `json:"configInstalled"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ConfigPath string `json:"configPath,omitempty"`
	// DefaultNetwork is the cluster-wide default network's name and
	// config file, empty until found (s6.1.1).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DefaultNetwork string `json:"defaultNetwork,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	DefaultNetworkFile string `json:"defaultNetworkFile,omitempty"`
	// MissingPlugins are CNI plugin types the node's configs name but
	// its bin dir lacks.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	MissingPlugins []string `json:"missingPlugins,omitempty"`
	// Settings are the node's config values that decide an ADD's plan.
	// +optional
	Settings *NodeSettings `json:"settings,omitempty"`
	// Policy is the node's policy in force and its last attempt.
	// +optional
	Policy *NodePolicy `json:"policy,omitempty"`
	// Extensions are the modules the node's config names.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Extensions []NodeExtension `json:"extensions,omitempty"`
	// Conditions: Ready is True when the config is installed, the default
	// network found, no plugin missing, the policy's last attempt
	// succeeded and every extension loaded; its message says what is not.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Updated is when the node last changed any of the above.
	// +optional
	Updated metav1.Time `json:"updated,omitempty"`
}

// ConditionReady is the PlexusNode condition kubectl wait can wait for.
const ConditionReady = "Ready"

// NodeSettings are the values of a node's plexus config that decide how
// an ADD is planned, so that explain plans as the node does.
type NodeSettings struct {
	// ClusterNetwork names the cluster-wide default network (s6).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ClusterNetwork string `json:"clusterNetwork,omitempty"`
	// SystemNamespace holds the NADs the config names without a namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SystemNamespace string `json:"systemNamespace,omitempty"`
	// Compat is "multus" or "off", as resolved from the config.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Compat string `json:"compat,omitempty"`
	// StrictSelection fails an ADD on an invalid selection annotation.
	// +optional
	StrictSelection bool `json:"strictSelection,omitempty"`
	// DefaultNetworks are attached to every pod outside SystemNamespaces.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	DefaultNetworks []string `json:"defaultNetworks,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	SystemNamespaces []string `json:"systemNamespaces,omitempty"`
}

// NodePolicy is the policy a node enforces, and its last attempt.
type NodePolicy struct {
	// Source is "object" (an AttachmentPolicy), "files" (paths in the
	// config only) or "none" (every attachment allowed).
	// +kubebuilder:validation:Enum=object;files;none
	Source string `json:"source"`
	// Object names the AttachmentPolicy the node follows.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Object string `json:"object,omitempty"`
	// Generation and Revision name the revision in force: the object's
	// generation and a digest of its modules and data.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Revision string `json:"revision,omitempty"`
	// +optional
	Since metav1.Time `json:"since,omitempty"`
	// ObservedGeneration is the last generation the node tried; Error
	// says why it refused it (empty when it is the one in force).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Error string `json:"error,omitempty"`
	// TestsPassed counts the Rego tests the revision in force passed.
	// +optional
	TestsPassed int32 `json:"testsPassed,omitempty"`
}

// NodeExtension is one module the node's config names.
type NodeExtension struct {
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256,omitempty"`
	Loaded bool   `json:"loaded"`
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Error string `json:"error,omitempty"`
}
