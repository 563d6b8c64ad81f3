// Package policies is the s7.4 stage: it decides, in Rego, whether a pod may
// use the NetworkAttachmentDefinition one of its selection elements names.
//
// The engine compiles the admin's modules and data once (New) and evaluates
// one prepared query per secondary attachment on ADD (Authorize). Every way
// the policy can fail to give a clear answer is a denial with a reason code
// (fail closed), because s7.4 makes a disallowed selection fail the pod.
package policies

import (
	"cmp"
	"errors"
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
	// Evaluator may only name OPA's topdown evaluator, the one plexus
	// has; see checkEvaluator.
	Evaluator string `json:"evaluator,omitempty"`
	// Object names an AttachmentPolicy whose active revision is loaded
	// with Paths. Only plexusd and the thin-mode installer keep a node's
	// revisions (policies/revision); the engine refuses it.
	Object *ObjectConfig `json:"object,omitempty"`
}

// ObjectConfig is the "policy" key's "object".
type ObjectConfig struct {
	// Name is the cluster-scoped AttachmentPolicy the node follows.
	Name string `json:"name"`
	// StateDir holds the node's verified revisions and the active one.
	StateDir string `json:"stateDir"`
	// DefaultPaths are files loaded in place of a revision until the node
	// has activated one (a fresh install).
	DefaultPaths []string `json:"defaultPaths,omitempty"`
}

// EvaluatorTopdown is OPA's interpreter, which evaluates every decision.
const EvaluatorTopdown = "topdown"

// evaluatorAuto asks plexus to pick and means topdown, so that configs
// setting it keep loading; "wasm", which plexus does not have, is refused.
const evaluatorAuto = "auto"

// Duration is the config's duration type (a Go duration string in JSON).
type Duration = config.Duration

// withDefaults fills empty fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Object != nil {
		return c, errors.New(`policy config: "object" is read by plexusd and by the thin-mode installer, not by the plugin: ` +
			`give the plugin "paths" only (plexusctl install --policy-object writes them)`)
	}
	if len(c.Paths) == 0 {
		return c, fmt.Errorf("policy config: \"paths\" is empty; name at least one .rego file or directory")
	}
	c.Query = cmp.Or(c.Query, DefaultQuery)
	ev, err := checkEvaluator(c.Evaluator)
	if err != nil {
		return c, err
	}
	c.Evaluator = ev
	if d := time.Duration(c.Deadline); d > MaxDeadline {
		return c, fmt.Errorf(`policy config: "deadline": %q is outside (0, %s]`, d, MaxDeadline)
	}
	c.Deadline = Duration(c.Deadline.Or(DefaultDeadline))
	return c, nil
}

// checkEvaluator returns the evaluator "evaluator" names, or an error
// naming the fix.
func checkEvaluator(name string) (string, error) {
	switch name {
	case "", EvaluatorTopdown, evaluatorAuto:
		return EvaluatorTopdown, nil
	case "wasm":
		return "", errors.New(`policy config: "evaluator": "wasm" is no longer supported: plexus evaluates policies with OPA's topdown; remove the key`)
	}
	return "", fmt.Errorf(`policy config: "evaluator": %q is not supported: plexus evaluates policies with OPA's topdown; remove the key`, name)
}
