package pipeline

import (
	"context"
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// Attachment is one network attachment of a pod: the cluster-wide default
// network (s6) or one selection element (s4.2: a repeated network is a
// separate attachment). Stages read it and, where documented, change it.
type Attachment struct {
	// Index is the element's position in the selection annotation; -1 for
	// the default network and defaultNetworks.
	Index   int
	Default bool
	// Origin says who chose the network: the admin (clusterNetwork,
	// defaultNetworks) or the pod (its default-network annotation, a
	// selection element). The policy decides on the pod's choices only.
	Origin Origin
	// Selection is the element as parsed; nil for the default network.
	Selection *selection.Element
	// NAD is the NetworkAttachmentDefinition; nil when the default network
	// comes from a file.
	NAD *source.NAD
	// Name is the status name (s5.3.1): "namespace/name" for a selection.
	Name string
	// IfName is the CNI_IFNAME used for every operation (s4.1.2.1.5, s4.2.1).
	IfName string
	// Config is the delegate's CNI config or config list after s3.4.2 name
	// injection. The prepare stage may replace it; type, name and
	// cniVersion of every plugin must stay as they are.
	Config json.RawMessage
	// ConfigArgs are set as "args": {"cni": {...}} in every delegate
	// plugin's config (s4.1.2.1.3.2, s4.1.2.1.4.2); the prepare stage may add.
	ConfigArgs map[string]any
	// CNIArgs are the delegate's CNI_ARGS.
	CNIArgs [][2]string
	// CapabilityArgs become runtimeConfig for delegates declaring them.
	CapabilityArgs map[string]any
	// PluginKeys are set at the top of every delegate plugin's config
	// ("deviceID").
	PluginKeys map[string]any
	// ResourceName is the NAD's k8s.v1.cni.cncf.io/resourceName, and
	// DeviceID the device the attachment uses: one kubelet allocated to
	// the pod, or the selection's deviceID. Set before authorization.
	ResourceName string
	DeviceID     string
	// ResourceClaim and Driver are the ResourceClaim and DRA driver of a
	// device allocated through a claim of the pod (ResourceClaimAnnotation).
	ResourceClaim string
	Driver        string
	// DevicePluginFile and DeviceInfoFile are the device-info spec's files
	// for a device of ResourceName (s4.1, s4.2); empty without one.
	DevicePluginFile string
	DeviceInfoFile   string
	// Result is the delegate's ADD result, set after the attachment.
	Result types.Result
	// Ignored maps each selection key plexus does not act on for this
	// attachment to the reason; it reaches the status entry
	// (StatusIgnoredKey).
	Ignored map[string]string
}

// Origin is who chose an attachment's network.
type Origin string

const (
	// OriginClusterNetwork: the cluster-wide default network (s6), from
	// clusterNetwork or delegates.
	OriginClusterNetwork Origin = "clusterNetwork"
	// OriginPodDefault: the pod's default network, chosen with the
	// v1.multus-cni.io/default-network annotation in place of s6's.
	OriginPodDefault Origin = "podDefaultNetwork"
	// OriginDefaultNetworks: a network of the defaultNetworks config key.
	OriginDefaultNetworks Origin = "defaultNetworks"
	// OriginSelection: a selection element (s4).
	OriginSelection Origin = "selection"
)

// ChosenByPod reports whether the pod chose the network, so the s7.4
// decision applies to it.
func (o Origin) ChosenByPod() bool { return o == OriginPodDefault || o == OriginSelection }

// Reason explains a policy decision with a stable code.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Decision is the outcome of one s7.4 access decision.
type Decision struct {
	Allowed bool     `json:"allowed"`
	Reasons []Reason `json:"reasons,omitempty"`
}

// AuthorizeRequest is everything an Authorizer may consider.
type AuthorizeRequest struct {
	Pod *source.Pod
	// NamespaceLabels are the pod namespace's labels; nil when the source has none.
	NamespaceLabels map[string]string
	Attachment      *Attachment
	// Selections are all of the pod's selection elements, in order.
	Selections []*selection.Element
}

// Authorizer makes the s7.4 decision for one attachment on ADD. The
// Decision is always meaningful: a denial carries reasons even when err is
// nil. An error with an allowing decision is still a denial (fail closed).
type Authorizer interface {
	Authorize(ctx context.Context, req *AuthorizeRequest) (Decision, error)
}

// NamespaceLabelsUser is implemented by Authorizers that know whether their
// policies read the namespace's labels; when they do not, the pipeline
// skips the lookup (one API request per ADD).
type NamespaceLabelsUser interface {
	NeedsNamespaceLabels() bool
}

// PrepareRequest is one attachment about to be made.
type PrepareRequest struct {
	Pod        *source.Pod
	Attachment *Attachment
	// Warn records something the pod's owner should know.
	Warn func(msg string)
	// Ignore records a selection key the stage does not act on, with the
	// reason, for the attachment's status entry (Attachment.Ignored); the
	// stage warns about it itself. May be nil.
	Ignore func(key, reason string)
}

// Preparer handles the reverse-domain keys of a selection element
// (s4.1.2.1): it may change Attachment.Config, ConfigArgs and CNIArgs, or
// reject the attachment by returning an error. It is called for every
// secondary attachment, including those without extension keys.
type Preparer interface {
	Prepare(ctx context.Context, req *PrepareRequest) error
}

// EnrichRequest is one attachment after a successful ADD.
type EnrichRequest struct {
	Pod        *source.Pod
	Attachment *Attachment
	// Entry is the attachment's status entry; the enricher may add
	// reverse-domain keys to Entry.Extra (s5.3).
	Entry *status.Entry
	Warn  func(msg string)
}

// Enricher adds implementation-specific keys to status entries.
type Enricher interface {
	Enrich(ctx context.Context, req *EnrichRequest) error
}

// Stages are the optional pipeline stages; a nil stage is absent.
type Stages struct {
	Authorizer Authorizer
	Preparer   Preparer
	Enricher   Enricher
}
