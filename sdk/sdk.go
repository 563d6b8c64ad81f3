// Package sdk is the guest side of plexus's extension ABI v1 (ABI.md): a
// vendor writes hooks as plain Go functions on typed requests, registers
// them from init, and builds the package for GOOS=wasip1 GOARCH=wasm with
// -buildmode=c-shared. The same hooks run natively in unit tests through
// RunPrepare, RunEnrich and Handle, exactly as the host would drive them.
// The documents are package abi's, which the host uses too.
package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/plexus-cni/plexus/sdk/abi"
)

// ABIVersion is the ABI this SDK speaks; the manifest's "abi" must match.
const ABIVersion = abi.Version

// Hook names, which are also the exported wasm function names.
const (
	HookPrepare = abi.HookPrepare
	HookEnrich  = abi.HookEnrich
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

// The ABI's documents (package abi).
type (
	Pod            = abi.Pod
	Network        = abi.Network
	Request        = abi.Request
	PrepareRequest = abi.PrepareRequest
	EnrichRequest  = abi.EnrichRequest
	Status         = abi.Status
	DNS            = abi.DNS
	Rejection      = abi.Rejection
	// Output is the wire form of every hook's answer.
	Output = abi.Output[any]
)

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

// EnrichResponse adds keys to the status entry; each must lie under the
// module's prefixes.
type EnrichResponse struct {
	Status   map[string]any
	Warnings []string
}

// Reject returns a Rejection with a formatted message.
func Reject(format string, args ...any) error {
	return &Rejection{Message: fmt.Sprintf(format, args...)}
}
