// Package abi defines plexus's extension ABI v1 (sdk/ABI.md): its names
// and the JSON documents the host and a guest exchange. The host
// (plexus's extensions package) and the SDK both use these types, so the
// two sides of the wire cannot drift apart. Unknown fields are ignored in
// both directions, so either side may add fields without a new version.
package abi

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Names of ABI v1.
const (
	// Version is the ABI version; a manifest's "abi" must match it.
	Version = 1
	// ManifestSection names the custom section holding the Manifest.
	ManifestSection = "plexus.manifest"
	// HostModule provides input_read and output_write.
	HostModule = "plexus"
	// WASIModule is the WASI preview1 module a guest may import from.
	WASIModule = "wasi_snapshot_preview1"

	// Hook names, which are also the exported wasm function names.
	HookPrepare = "prepare"
	HookEnrich  = "enrich"
)

// Manifest is a module's declaration, the JSON in its ManifestSection.
type Manifest struct {
	ABI     int    `json:"abi"`
	Name    string `json:"name"`
	Version string `json:"version"`
	// Prefixes are the reverse-domain key prefixes the module owns.
	Prefixes []string `json:"prefixes"`
	// Hooks are the hooks the module implements: "prepare", "enrich".
	Hooks []string `json:"hooks"`
	// EnrichAll asks for enrich on every attachment, not only those whose
	// selection element carries the module's keys.
	EnrichAll bool `json:"enrichAll,omitempty"`
}

// Has reports whether the module declares the hook.
func (m *Manifest) Has(hook string) bool { return slices.Contains(m.Hooks, hook) }

// Pod identifies the pod being attached.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Network identifies the attachment's network.
type Network struct {
	// Namespace and Name are the NetworkAttachmentDefinition's.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// StatusName is the attachment's name in network-status.
	StatusName string `json:"statusName"`
	Default    bool   `json:"default"`
	// Index is the element's position in the selection annotation, -1 for
	// the default network.
	Index int `json:"index"`
}

// Request is what every hook receives.
type Request struct {
	ABI     int     `json:"abi"`
	Hook    string  `json:"hook"`
	Pod     Pod     `json:"pod"`
	Network Network `json:"network"`
	IfName  string  `json:"ifName"`
	// Keys are the selection element's keys this module owns, and only those.
	Keys map[string]json.RawMessage `json:"keys"`
	// ModuleConfig is the module's "config" from plexus's configuration.
	ModuleConfig json.RawMessage `json:"moduleConfig,omitempty"`
}

// Key decodes the owned key into v; it reports false when the key is absent.
func (r *Request) Key(key string, v any) (bool, error) {
	raw, ok := r.Keys[key]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("key %q: %w", key, err)
	}
	return true, nil
}

// DecodeConfig decodes the module config into v; absent leaves v as is.
func (r *Request) DecodeConfig(v any) error {
	if len(r.ModuleConfig) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.ModuleConfig, v); err != nil {
		return fmt.Errorf("module config: %w", err)
	}
	return nil
}

// PrepareRequest is an attachment about to be made.
type PrepareRequest struct {
	Request
	// Config is the delegate's CNI config or config list.
	Config json.RawMessage `json:"config"`
	// CNIArgs are the delegate's CNI_ARGS.
	CNIArgs map[string]string `json:"cniArgs"`
	// ConfigArgs become "args": {"cni": ...} in every delegate plugin.
	ConfigArgs map[string]any `json:"configArgs"`
}

// EnrichRequest is an attachment after a successful ADD.
type EnrichRequest struct {
	Request
	// Status is the attachment's network-status entry (spec s5.3). The
	// host sends the whole entry, reverse-domain keys included; Status
	// decodes the fields the specification defines.
	Status Status `json:"status"`
	// Result is the delegate's result converted to CNI 1.0.0; absent when
	// the delegate returned none.
	Result json.RawMessage `json:"result,omitempty"`
	// NADAnnotations are the NetworkAttachmentDefinition's annotations.
	NADAnnotations map[string]string `json:"nadAnnotations,omitempty"`
}

// Status is one network-status entry.
type Status struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Default   bool     `json:"default"`
	DNS       *DNS     `json:"dns,omitempty"`
}

// DNS is the entry's or the result's DNS settings.
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
}

// Rejection is a deliberate refusal of the attachment, reported to the pod's
// owner; it always fails the attachment. Any other error is a module
// failure, which the admin's failure policy may ignore.
type Rejection struct {
	Message string `json:"message"`
}

func (r *Rejection) Error() string { return r.Message }

// Output is every hook's answer; each hook's fields are its own (ABI.md
// §3). V holds the values of addConfigArgs and status: the SDK builds
// them from Go values (any), the host keeps them as they were written
// (json.RawMessage).
type Output[V any] struct {
	Config        json.RawMessage   `json:"config,omitempty"`
	AddCNIArgs    map[string]string `json:"addCNIArgs,omitempty"`
	AddConfigArgs map[string]V      `json:"addConfigArgs,omitempty"`
	Status        map[string]V      `json:"status,omitempty"`
	Warnings      []string          `json:"warnings,omitempty"`
	Reject        *Rejection        `json:"reject,omitempty"`
	Error         string            `json:"error,omitempty"`
}
