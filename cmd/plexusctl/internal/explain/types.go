// Package explain answers "why does this pod have, or not have, its
// networks" (plexusctl explain pod): it makes the node's ADD plan
// (core/pipeline's Plan) with the selection (s4.1), NADs (s3.4), policy
// (s7.4) and extension keys (s4.1.2.1), and reads what the last ADD left (s5).
//
// The Report types are the stable "-o json" document: fields are only
// added, never renamed.
package explain

import (
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
)

// Report is everything explain found about one pod.
type Report struct {
	Pod            Pod             `json:"pod"`
	Settings       Settings        `json:"settings"`
	Annotation     Annotation      `json:"annotation"`
	DefaultNetwork *DefaultNetwork `json:"defaultNetwork,omitempty"`
	// DefaultNetworks are the config's defaultNetworks the pod gets, on
	// net1, net2, ... before its selections (Index -1).
	DefaultNetworks []Attachment   `json:"defaultNetworks,omitempty"`
	Attachments     []Attachment   `json:"attachments"`
	Add             AddVerdict     `json:"add"`
	Policy          PolicyInfo     `json:"policy"`
	Extensions      ExtensionsInfo `json:"extensions"`
	LastAdd         *LastAdd       `json:"lastAdd,omitempty"`
	Node            *Node          `json:"node,omitempty"`
	// Problems keep a network from the pod; empty means OK.
	Problems []string `json:"problems"`
	// Warnings are findings that do not keep a network from the pod.
	Warnings []string `json:"warnings"`
	OK       bool     `json:"ok"`
}

// Pod names the pod and where it was read from.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	NodeName  string `json:"nodeName,omitempty"`
	// From is "cluster" or the manifest's path.
	From string `json:"from"`
	// Started (RFC 3339) divides this run's events from older ones.
	Phase   string `json:"phase,omitempty"`
	Started string `json:"started,omitempty"`
}

// Settings are the values of the node's plexus config that decide a plan.
type Settings struct {
	// From is "PlexusNode NAME", "config PATH" or "defaults".
	From string `json:"from"`
	plexusapi.NodeSettings
}

// AddVerdict is the ADD's outcome as the plan step decides it, before any
// delegate runs; a delegate's own failure is the node's to tell.
type AddVerdict struct {
	Fails   bool   `json:"fails"`
	Code    uint   `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Network and Element are where it fails; absent for the whole pod.
	Network string `json:"network,omitempty"`
	Element *int   `json:"element,omitempty"`
	// Interfaces are the pod's when it does not fail, default first (s6.2).
	Interfaces []string `json:"interfaces,omitempty"`
}

// Annotation is the k8s.v1.cni.cncf.io/networks annotation as parsed (s4.1).
type Annotation struct {
	Present bool   `json:"present"`
	Value   string `json:"value,omitempty"`
	// Format is "comma" or "json"; empty when absent or invalid.
	Format string `json:"format,omitempty"`
	Valid  bool   `json:"valid"`
	Error  string `json:"error,omitempty"`
	// ErrorElement is absent when the whole annotation is at fault.
	ErrorElement *int     `json:"errorElement,omitempty"`
	Consequence  string   `json:"consequence,omitempty"`
	Warnings     []string `json:"warnings,omitempty"`
}

// DefaultNetwork is the v1.multus-cni.io/default-network annotation.
type DefaultNetwork struct {
	Value string `json:"value"`
	// Ignored says why the node does not read it (compat off).
	Ignored string    `json:"ignored,omitempty"`
	Network string    `json:"network,omitempty"`
	Error   string    `json:"error,omitempty"`
	NAD     *NAD      `json:"nad,omitempty"`
	Policy  *Decision `json:"policy,omitempty"`
}

// Attachment is one selection element (s4.2: a repeated network is a
// separate attachment) and what became of it.
type Attachment struct {
	Index   int    `json:"index"`
	Network string `json:"network"`
	// Interface is the requested name, or the one plexus would generate.
	Interface          string            `json:"interface"`
	InterfaceRequested bool              `json:"interfaceRequested"`
	IPs                []string          `json:"ips,omitempty"`
	MAC                string            `json:"mac,omitempty"`
	DeviceID           string            `json:"deviceID,omitempty"`
	InfinibandGUID     string            `json:"infinibandGUID,omitempty"`
	Compat             *selection.Compat `json:"compat,omitempty"`
	// Ignored maps each key plexus ignores to why.
	Ignored map[string]string `json:"ignored,omitempty"`
	// Keys are the reverse-domain keys (s4.1.2.1) and their owners.
	Keys   []Key     `json:"keys,omitempty"`
	NAD    NAD       `json:"nad"`
	Policy *Decision `json:"policy,omitempty"`
}

// NAD is a NetworkAttachmentDefinition as resolved and checked (s3.4).
type NAD struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Found     bool   `json:"found"`
	// From is "cluster" or the manifest's path.
	From string `json:"from,omitempty"`
	// ConfigSource is where the delegate config came from (s3.4.1):
	// "spec.config", or "node" when only the node's confDir can tell.
	ConfigSource string   `json:"configSource,omitempty"`
	ConfigValid  bool     `json:"configValid"`
	Error        string   `json:"error,omitempty"`
	CNIVersion   string   `json:"cniVersion,omitempty"`
	PluginTypes  []string `json:"pluginTypes,omitempty"`
	IPAMTypes    []string `json:"ipamTypes,omitempty"`
	// ResourceName and ResourceClaim are the devices it needs.
	ResourceName  string `json:"resourceName,omitempty"`
	ResourceClaim string `json:"resourceClaim,omitempty"`
	DeviceError   string `json:"deviceError,omitempty"`
}

// Decision is the s7.4 policy's answer for one attachment.
type Decision struct {
	Evaluated bool     `json:"evaluated"`
	Allowed   bool     `json:"allowed"`
	Reasons   []Reason `json:"reasons,omitempty"`
	// Note says why the policy was not asked.
	Note string `json:"note,omitempty"`
}

// Reason is one rule's denial: a stable code and its message.
type Reason = pipeline.Reason

// Key is one reverse-domain key of an element and who owns it.
type Key struct {
	Key     string `json:"key"`
	Module  string `json:"module,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	Outcome string `json:"outcome"`
}

// PolicyInfo says whether a policy was given.
type PolicyInfo struct {
	Given bool     `json:"given"`
	Paths []string `json:"paths,omitempty"`
	// Object and Revision: the AttachmentPolicy evaluated without paths.
	Object   string `json:"object,omitempty"`
	Revision string `json:"revision,omitempty"`
	// ObjectMissing: no such object exists, and the baseline decided.
	ObjectMissing bool   `json:"objectMissing,omitempty"`
	Note          string `json:"note,omitempty"`
	Error         string `json:"error,omitempty"`
}

// ExtensionsInfo is the extensions config explain read.
type ExtensionsInfo struct {
	Given       bool     `json:"given"`
	File        string   `json:"file,omitempty"`
	UnownedKeys string   `json:"unownedKeys,omitempty"`
	Modules     []Module `json:"modules,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// Module is one extension module's declaration.
type Module struct {
	Name     string   `json:"name"`
	Path     string   `json:"path"`
	Prefixes []string `json:"prefixes"`
	Hooks    []string `json:"hooks"`
}

// LastAdd is what the last ADD left on the pod object.
type LastAdd struct {
	// Status is the network-status annotation (s5).
	StatusPresent bool          `json:"statusPresent"`
	Status        []StatusEntry `json:"status,omitempty"`
	StatusError   string        `json:"statusError,omitempty"`
	Condition     *Condition    `json:"condition,omitempty"`
	// Events are the pod's events, most relevant first.
	Events      []Event `json:"events,omitempty"`
	EventsError string  `json:"eventsError,omitempty"`
}

// StatusEntry is one network-status entry (s5.3).
type StatusEntry struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Default   bool     `json:"default"`
}

// Condition is the pod condition plexus.io/NetworkAttachments.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Time    string `json:"time,omitempty"`
}

// Event is one event of the pod.
type Event struct {
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	Count    int32  `json:"count,omitempty"`
	LastTime string `json:"lastTime,omitempty"`
	Source   string `json:"source,omitempty"`
	// OtherNode is the source node of a plexus event not from the pod's.
	OtherNode string `json:"otherNode,omitempty"`
	// Old: last seen before the running pod started, so since got past.
	Old bool `json:"old,omitempty"`
}

// Node is what the API tells of the node's side.
type Node struct {
	Name string `json:"name"`
	// Pods are the plexus DaemonSet pods on the node.
	Pods  []NodePod  `json:"pods"`
	Error string     `json:"error,omitempty"`
	State *NodeState `json:"state,omitempty"`
	// Policy is the AttachmentPolicy the node follows, as the API has it.
	Policy *FollowedPolicy `json:"policy,omitempty"`
	// Unavailable lists node-side checks explain cannot make yet.
	Unavailable []string `json:"unavailable"`
}

// NodeState is the node's PlexusNode.
type NodeState struct {
	// Found is false when its plexus does not run or does not report.
	Found  bool                        `json:"found"`
	Error  string                      `json:"error,omitempty"`
	Status *plexusapi.PlexusNodeStatus `json:"status,omitempty"`
	// Stale says why Status may not describe the plexus running there.
	Stale string `json:"stale,omitempty"`
	// MissingForPod are the lacking plugins the pod's networks need.
	MissingForPod []NeededPlugin `json:"missingForPod,omitempty"`
}

// NeededPlugin is a CNI plugin and the pod's networks that need it.
type NeededPlugin struct {
	Plugin   string   `json:"plugin"`
	Networks []string `json:"networks"`
}

// FollowedPolicy is the object a node follows and its generation now.
type FollowedPolicy struct {
	Object     string `json:"object"`
	Generation int64  `json:"generation,omitempty"`
	Missing    bool   `json:"missing,omitempty"`
	Error      string `json:"error,omitempty"`
}

// NodePod is one plexus pod on the node.
type NodePod struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	Message  string `json:"message,omitempty"`
}
