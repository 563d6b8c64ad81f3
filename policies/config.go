// Package policies is the s7.4 stage: it decides, in Rego, whether a pod may
// use the NetworkAttachmentDefinition one of its selection elements names.
//
// The engine compiles the admin's modules and data once (New) and evaluates
// one prepared query per secondary attachment on ADD (Authorize). Every way
// the policy can fail to give a clear answer is a denial with a reason code
// (fail closed), because s7.4 makes a disallowed selection fail the pod.
package policies

import (
	"fmt"
	"time"

	"github.com/plexus-cni/plexus/core/config"
)

// Defaults used when the "policy" config leaves a field empty.
const (
	DefaultQuery    = "data.plexus.authz.decision"
	DefaultDeadline = 50 * time.Millisecond
	// MaxDeadline bounds what an admin may configure: the decision runs
	// inside the runtime's CNI ADD, which has its own timeout.
	MaxDeadline = 10 * time.Second
)

// Config is the plugin config's "policy" key.
type Config struct {
	// Paths are .rego modules, data files (.json, .yaml, .yml) or
	// directories of them; see LoadPaths for how data files map into data.
	Paths []string `json:"paths"`
	// Query names the decision document; DefaultQuery when empty.
	Query string `json:"query,omitempty"`
	// Deadline bounds one evaluation, up to MaxDeadline; DefaultDeadline
	// when unset.
	Deadline Duration `json:"deadline,omitempty"`
	// Evaluator runs the decisions: EvaluatorTopdown when empty.
	Evaluator string `json:"evaluator,omitempty"`
}

// The evaluators. Both decide alike (the tests run every policy case
// through both); they differ in cost:
//   - topdown, OPA's interpreter: ready in a few milliseconds, for the
//     thin plugin, which loads the policy in every ADD;
//   - wasm, the policy compiled to WebAssembly and run in wazero: ~70 ms
//     to prepare, then a decision is several times cheaper, for plexusd;
//   - auto: wasm when the policy can be compiled to it (the query is a
//     plain data reference, no "with", no built-in that yields several
//     values), topdown otherwise.
const (
	EvaluatorTopdown = "topdown"
	EvaluatorWasm    = "wasm"
	EvaluatorAuto    = "auto"
)

// Duration is the config's duration type (a Go duration string in JSON).
type Duration = config.Duration

// withDefaults fills empty fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if len(c.Paths) == 0 {
		return c, fmt.Errorf("policy config: \"paths\" is empty; name at least one .rego file or directory")
	}
	if c.Query == "" {
		c.Query = DefaultQuery
	}
	switch c.Evaluator {
	case "":
		c.Evaluator = EvaluatorTopdown
	case EvaluatorTopdown, EvaluatorWasm, EvaluatorAuto:
	default:
		return c, fmt.Errorf("policy config: evaluator %q is not one of %s, %s, %s", c.Evaluator, EvaluatorTopdown, EvaluatorWasm, EvaluatorAuto)
	}
	if d := time.Duration(c.Deadline); d > MaxDeadline {
		return c, fmt.Errorf(`policy config: "deadline": %q is outside (0, %s]`, d, MaxDeadline)
	}
	c.Deadline = Duration(c.Deadline.Or(DefaultDeadline))
	return c, nil
}
