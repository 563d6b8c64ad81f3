package extensions

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/status"
)

// protectedKeys may not change in a delegate config or in any plugin of a
// config list. type, name and cniVersion decide which plugin runs and what
// it is called (s3.4.2); args carries the s4.1.2.1.3.2/s4.1.2.1.4.2 requests
// plexus must verify (modules use addConfigArgs); runtimeConfig belongs to
// the runtime.
var protectedKeys = []string{"type", "name", "cniVersion", "args", "runtimeConfig"}

// checkConfigChange refuses a new delegate config that changes a protected
// key, turns a config into a list or back, or adds or removes plugins.
func checkConfigChange(oldConf, newConf json.RawMessage) error {
	var o, n map[string]json.RawMessage
	if err := json.Unmarshal(oldConf, &o); err != nil {
		return fmt.Errorf("current delegate config: %w", err)
	}
	if err := json.Unmarshal(newConf, &n); err != nil || n == nil {
		return fmt.Errorf("returned config is not a JSON object")
	}
	if err := checkProtected("config", o, n); err != nil {
		return err
	}
	_, oList := o["plugins"]
	_, nList := n["plugins"]
	if oList != nList {
		return fmt.Errorf("may not turn a config into a config list or back")
	}
	if !oList {
		return nil
	}
	var op, np []map[string]json.RawMessage
	if err := json.Unmarshal(o["plugins"], &op); err != nil {
		return fmt.Errorf("current delegate config plugins: %w", err)
	}
	if err := json.Unmarshal(n["plugins"], &np); err != nil {
		return fmt.Errorf("returned plugins is not a list of objects")
	}
	if len(op) != len(np) {
		return fmt.Errorf("may not add or remove plugins (%d before, %d returned)", len(op), len(np))
	}
	for i := range op {
		if err := checkProtected(fmt.Sprintf("plugin %d", i), op[i], np[i]); err != nil {
			return err
		}
	}
	return nil
}

func checkProtected(where string, o, n map[string]json.RawMessage) error {
	for _, k := range protectedKeys {
		if !sameJSON(o[k], n[k]) {
			return fmt.Errorf("may not change %q of the %s", k, where)
		}
	}
	return nil
}

// sameJSON compares two values by meaning, not bytes; absent equals absent.
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var av, bv any
	if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(av, bv)
}

// preparePlan is a validated prepare output, applied only as a whole.
type preparePlan struct {
	config     json.RawMessage
	cniArgs    [][2]string
	configArgs map[string]any
}

// planPrepare validates a prepare output against the attachment.
func planPrepare(a *pipeline.Attachment, out *wireOutput) (*preparePlan, error) {
	p := &preparePlan{configArgs: map[string]any{}}
	if len(out.Config) > 0 && string(out.Config) != "null" {
		if err := checkConfigChange(a.Config, out.Config); err != nil {
			return nil, err
		}
		p.config = out.Config
	}
	have := cniArgsMap(a.CNIArgs)
	for _, k := range slices.Sorted(maps.Keys(out.AddCNIArgs)) {
		v := out.AddCNIArgs[k]
		if k == "" || strings.ContainsAny(k, "=;") || strings.Contains(v, ";") {
			return nil, fmt.Errorf("CNI_ARGS pair %q=%q is malformed", k, v)
		}
		if _, ok := have[k]; ok {
			return nil, fmt.Errorf("may not change CNI_ARGS key %q", k)
		}
		p.cniArgs = append(p.cniArgs, [2]string{k, v})
	}
	held := map[string]string{} // folded args.cni key -> the key as set
	for k := range a.ConfigArgs {
		held[selection.FoldArgKey(k)] = k
	}
	for _, k := range slices.Sorted(maps.Keys(out.AddConfigArgs)) {
		if k == "" {
			return nil, fmt.Errorf("args.cni key %q is malformed", k)
		}
		// A delegate reads "VLAN" and "vlan" as one key (encoding/json
		// folds case), so a key already held in any spelling stays as set.
		f := selection.FoldArgKey(k)
		if prev, ok := held[f]; ok {
			return nil, fmt.Errorf("may not change args.cni key %q (held as %q: delegates match keys ignoring case)", k, prev)
		}
		held[f] = k
		var v any
		if err := json.Unmarshal(out.AddConfigArgs[k], &v); err != nil {
			return nil, fmt.Errorf("args.cni key %q: %w", k, err)
		}
		p.configArgs[k] = v
	}
	return p, nil
}

func (p *preparePlan) apply(a *pipeline.Attachment) {
	if p.config != nil {
		a.Config = p.config
	}
	a.CNIArgs = append(a.CNIArgs, p.cniArgs...)
	if len(p.configArgs) > 0 && a.ConfigArgs == nil {
		a.ConfigArgs = map[string]any{}
	}
	maps.Copy(a.ConfigArgs, p.configArgs)
}

// checkStatusKeys enforces s5.3 on an enrich output: every key has a
// period (the others are reserved) and lies under the module's prefixes.
func checkStatusKeys(d *Declaration, keys map[string]json.RawMessage) error {
	if len(keys) > maxStatusKeys {
		return fmt.Errorf("%d status keys exceed the cap of %d per call", len(keys), maxStatusKeys)
	}
	total := 0
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		total += len(k) + len(keys[k])
		if len(keys[k]) > maxStatusValue {
			return fmt.Errorf("status key %q: value of %d bytes exceeds the cap of %d", k, len(keys[k]), maxStatusValue)
		}
		if total > maxStatusCallBytes {
			return fmt.Errorf("status keys exceed the cap of %d bytes per call", maxStatusCallBytes)
		}
		if !strings.Contains(k, ".") {
			return fmt.Errorf("status key %q is reserved by the specification (s5.3)", k)
		}
		if !ownsKey(d, k) {
			return fmt.Errorf("status key %q is outside the module's prefixes %v", k, d.Prefixes)
		}
		if !json.Valid(keys[k]) {
			return fmt.Errorf("status key %q: value is not valid JSON", k)
		}
	}
	return nil
}

func applyStatus(e *status.Entry, keys map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if err := e.SetExtra(k, keys[k]); err != nil {
			return err
		}
	}
	return nil
}

func ownsKey(d *Declaration, key string) bool {
	return slices.ContainsFunc(d.Prefixes, func(p string) bool { return Owns(p, key) })
}
