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
	// Origin says who chose the network, the admin or the pod; the policy
	// decides on the pod's choices only.
	Origin    Origin
	Selection *selection.Element // nil for the default network
	// NAD is nil when the default network comes from a file.
	NAD    *source.NAD
	Name   string // the status name (s5.3.1): "namespace/name" for a selection
	IfName string // CNI_IFNAME for every operation (s4.1.2.1.5, s4.2.1)
	// Config is the delegate's CNI config or config list after s3.4.2 name
	// injection. The prepare stage may replace it, keeping every plugin's
	// type, name and cniVersion.
	Config json.RawMessage
	// ConfigArgs are set as "args": {"cni": {...}} in every delegate
	// plugin's config (s4.1.2.1.3.2, s4.1.2.1.4.2); the prepare stage may add.
	ConfigArgs     map[string]any
	CNIArgs        [][2]string    // the delegate's CNI_ARGS
	CapabilityArgs map[string]any // runtimeConfig for delegates declaring them
	// PluginKeys are set at the top of every delegate plugin's config ("deviceID").
	PluginKeys map[string]any
	// ResourceName is the NAD's k8s.v1.cni.cncf.io/resourceName, and
	// DeviceID the device the attachment uses (kubelet's, or the
	// selection's deviceID). Set before authorization.
	ResourceName string
	DeviceID     string
	// ResourceClaim and Driver are the ResourceClaim and DRA driver of a
	// device allocated through a claim of the pod (ResourceClaimAnnotation).
	ResourceClaim string
	Driver        string
	// DevicePluginFile and DeviceInfoFile are the device-info spec's files
	// (s4.1, s4.2); empty without a device.
	DevicePluginFile string
	DeviceInfoFile   string
	Result           types.Result // the delegate's ADD result
	// Ignored maps each selection key plexus does not act on to the
	// reason, for the status entry (StatusIgnoredKey).
	Ignored map[string]string
}

// Origin is who chose an attachment's network.
type Origin string

const (
	// OriginClusterNetwork: the cluster-wide default network (s6).
	OriginClusterNetwork Origin = "clusterNetwork"
	// OriginPodDefault: the pod's v1.multus-cni.io/default-network.
	OriginPodDefault      Origin = "podDefaultNetwork"
	OriginDefaultNetworks Origin = "defaultNetworks"
	OriginSelection       Origin = "selection" // a selection element (s4)
)

// ChosenByPod reports whether the pod chose the network (for s7.4).
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
	Pod             *source.Pod
	NamespaceLabels map[string]string // nil when the source has none
	Attachment      *Attachment
	Selections      []*selection.Element // all of the pod's, in order
}

// Authorizer makes the s7.4 decision for one attachment on ADD. A denial
// carries reasons even when err is nil; an error is a denial (fail closed).
type Authorizer interface {
	Authorize(ctx context.Context, req *AuthorizeRequest) (Decision, error)
}

// NamespaceLabelsUser is implemented by Authorizers that know whether their
// policies read the namespace's labels, so the pipeline can skip the lookup.
type NamespaceLabelsUser interface {
	NeedsNamespaceLabels() bool
}

// PrepareRequest is one attachment about to be made.
type PrepareRequest struct {
	Pod        *source.Pod
	Attachment *Attachment
	Warn       func(msg string) // tells the pod's owner
	// Ignore records a selection key the stage does not act on, with the
	// reason (Attachment.Ignored); the stage warns itself. May be nil.
	Ignore func(key, reason string)
}

// Preparer handles the reverse-domain keys of a selection element
// (s4.1.2.1) for every secondary attachment: it may change
// Attachment.Config, ConfigArgs and CNIArgs, or reject it with an error.
type Preparer interface {
	Prepare(ctx context.Context, req *PrepareRequest) error
}

// EnrichRequest is one attachment after a successful ADD.
type EnrichRequest struct {
	Pod        *source.Pod
	Attachment *Attachment
	// Entry is the status entry; the enricher may add reverse-domain keys
	// to Entry.Extra (s5.3).
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
