// Package sdk is the guest side of plexus's extension ABI v1 (ABI.md): a
// vendor writes hooks as plain Go functions on typed requests, registers
// them from init, and builds the package for GOOS=wasip1 GOARCH=wasm with
// -buildmode=c-shared. The same hooks run natively in unit tests through
// RunPrepare, RunEnrich and Handle, exactly as the host would drive them.
package sdk

import (
	"encoding/json"
	"fmt"
)

// ABIVersion is the ABI this SDK speaks; the manifest's "abi" must match.
const ABIVersion = 1

// Hook names, which are also the exported wasm function names.
const (
	HookPrepare = "prepare"
	HookEnrich  = "enrich"
)

// Module is a set of hooks; either may be nil.
type Module struct {
	Prepare func(*PrepareRequest) (*PrepareResponse, error)
	Enrich  func(*EnrichRequest) (*EnrichResponse, error)
}

// registered is the module the wasm exports serve. It is the one piece of
// package state: a wasm reactor has no other way to find its hooks.
var registered Module

// Register sets the module the exported hooks call. Call it from init: a
// c-shared module runs package initialisers, never main.
func Register(m Module) { registered = m }

// Registered returns what Register set, so a test can check its init.
func Registered() Module { return registered }

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

// PrepareResponse changes the attachment; a nil response changes nothing.
type PrepareResponse struct {
	// Config replaces the delegate config. type, name, cniVersion, args and
	// runtimeConfig must stay as they are, in the config and in every
	// plugin, and plugins may not be added or removed.
	Config json.RawMessage
	// AddCNIArgs and AddConfigArgs add keys; existing keys may not change.
	AddCNIArgs    map[string]string
	AddConfigArgs map[string]any
	Warnings      []string
}

// EnrichRequest is an attachment after a successful ADD.
type EnrichRequest struct {
	Request
	// Status is the attachment's network-status entry (spec s5.3).
	Status Status `json:"status"`
	// Result is the delegate's result converted to CNI 1.0.0; absent when
	// the delegate returned none.
	Result json.RawMessage `json:"result,omitempty"`
	// NADAnnotations are the NetworkAttachmentDefinition's annotations.
	NADAnnotations map[string]string `json:"nadAnnotations,omitempty"`
}

// EnrichResponse adds keys to the status entry; each must lie under the
// module's prefixes.
type EnrichResponse struct {
	Status   map[string]any
	Warnings []string
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

// Reject returns a Rejection with a formatted message.
func Reject(format string, args ...any) error {
	return &Rejection{Message: fmt.Sprintf(format, args...)}
}

// Output is the wire form of every hook's answer.
type Output struct {
	Config        json.RawMessage   `json:"config,omitempty"`
	AddCNIArgs    map[string]string `json:"addCNIArgs,omitempty"`
	AddConfigArgs map[string]any    `json:"addConfigArgs,omitempty"`
	Status        map[string]any    `json:"status,omitempty"`
	Warnings      []string          `json:"warnings,omitempty"`
	Reject        *Rejection        `json:"reject,omitempty"`
	Error         string            `json:"error,omitempty"`
}
