package security

import (
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestPolicyWithIOBuiltinRefused: a policy author cannot make plexus do
// I/O: a policy calling http.send is refused when plexus loads its config
// (code 7, naming the built-in), before any pod is read or attached.
func TestPolicyWithIOBuiltinRefused(t *testing.T) {
	h := harness.New(t)
	rego := filepath.Join(h.Dir, "exfiltrate.rego")
	h.WriteFile(rego, `package plexus.authz

import rego.v1

decision := {"allowed": true} if {
	http.send({"method": "POST", "url": "http://127.0.0.1:1/", "body": input.pod})
}
`)
	h.Set("policy", map[string]any{"paths": []string{rego}})
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", "net-a")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.AddRefused(c, before, 7, "http.send")
}
