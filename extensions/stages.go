package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/sdk/abi"
)

// Prepare hands each module the keys it owns in the attachment's selection
// element (s4.1.2.1), in config order; each sees the config as the previous
// one left it. A rejection fails the attachment whatever the failure policy.
func (h *Host) Prepare(ctx context.Context, req *pipeline.PrepareRequest) error {
	a := req.Attachment
	if a == nil || a.Selection == nil || len(a.Selection.Extensions) == 0 {
		return nil
	}
	warn := warner(req.Warn)
	groups, unowned := h.partition(a.Selection.Extensions)
	for _, k := range unowned {
		msg := fmt.Sprintf("selection element %d (%s): no extension owns key %q", a.Selection.Index, a.Selection.Ref(), k)
		if h.unownedFail {
			return errors.New(msg)
		}
		warn(msg + "; ignored")
		if req.Ignore != nil {
			req.Ignore(k, "no extension owns this key")
		}
	}
	for _, m := range h.modules {
		keys, ok := groups[m]
		if !ok || !m.decl.Has(abi.HookPrepare) {
			continue
		}
		if err := m.prepare(ctx, req, keys, warn); err != nil {
			return err
		}
	}
	return nil
}

func (m *module) prepare(ctx context.Context, req *pipeline.PrepareRequest, keys map[string]json.RawMessage, warn func(string)) error {
	out, err := m.invoke(ctx, abi.HookPrepare, newPrepareInput(m, req, keys))
	if err != nil {
		return m.failed(abi.HookPrepare, err, warn)
	}
	m.relayWarnings(abi.HookPrepare, out.Warnings, warn)
	if out.Reject != nil {
		return &HookError{Module: m.name(), Hook: abi.HookPrepare, Rejected: true, Err: errors.New(out.Reject.Message)}
	}
	if out.Error != "" {
		return m.failed(abi.HookPrepare, fmt.Errorf("module error: %s", out.Error), warn)
	}
	plan, err := planPrepare(req.Attachment, out)
	if err != nil {
		return m.failed(abi.HookPrepare, err, warn)
	}
	plan.apply(req.Attachment)
	return nil
}

// Enrich runs, after a successful ADD, the enrich hook of each module that
// owns keys of the selection element or sees every attachment, adding the
// keys it returns to the status entry (s5.3).
func (h *Host) Enrich(ctx context.Context, req *pipeline.EnrichRequest) error {
	a := req.Attachment
	if a == nil || req.Entry == nil {
		return nil
	}
	var groups map[*module]map[string]json.RawMessage
	if a.Selection != nil {
		// Unowned keys were reported by Prepare already.
		groups, _ = h.partition(a.Selection.Extensions)
	}
	warn := warner(req.Warn)
	for _, m := range h.modules {
		keys, ok := groups[m]
		if !m.decl.Has(abi.HookEnrich) || (!ok && !m.decl.EnrichAll) {
			continue
		}
		if m.refused != nil && !ok {
			// Logged once at load; only the pods that chose its keys hear.
			continue
		}
		if err := m.enrich(ctx, req, keys, warn); err != nil {
			return err
		}
	}
	return nil
}

func (m *module) enrich(ctx context.Context, req *pipeline.EnrichRequest, keys map[string]json.RawMessage, warn func(string)) error {
	in, err := newEnrichInput(m, req, keys)
	if err != nil {
		return m.failed(abi.HookEnrich, err, warn)
	}
	out, err := m.invoke(ctx, abi.HookEnrich, in)
	if err != nil {
		return m.failed(abi.HookEnrich, err, warn)
	}
	m.relayWarnings(abi.HookEnrich, out.Warnings, warn)
	if out.Error != "" {
		return m.failed(abi.HookEnrich, fmt.Errorf("module error: %s", out.Error), warn)
	}
	if err := checkStatusKeys(m.decl, out.Status); err != nil {
		return m.failed(abi.HookEnrich, err, warn)
	}
	if err := applyStatus(req.Entry, out.Status); err != nil {
		return m.failed(abi.HookEnrich, err, warn)
	}
	return nil
}

// enrichInput sends the whole status entry, reverse-domain keys included,
// where abi.EnrichRequest decodes only the specification's fields: the
// shallower Status field wins in encoding/json.
type enrichInput struct {
	abi.EnrichRequest
	Status json.RawMessage `json:"status"`
}

// wireOutput is what a hook writes, values kept as the guest wrote them.
type wireOutput = abi.Output[json.RawMessage]

func decodeOutput(b []byte) (*wireOutput, error) {
	var out wireOutput
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("output is not a JSON object: %w", err)
	}
	return &out, nil
}

func common(hook string, m *module, pod *source.Pod, a *pipeline.Attachment, keys map[string]json.RawMessage) abi.Request {
	c := abi.Request{
		ABI: abi.Version, Hook: hook, IfName: a.IfName, Keys: keys,
		Network: abi.Network{StatusName: a.Name, Default: a.Default, Index: a.Index},
	}
	if keys == nil {
		c.Keys = map[string]json.RawMessage{}
	}
	if len(m.config) > 0 {
		c.ModuleConfig = m.config
	}
	if pod != nil {
		c.Pod = abi.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	}
	switch {
	case a.NAD != nil:
		c.Network.Namespace, c.Network.Name = a.NAD.Namespace, a.NAD.Name
	case a.Selection != nil:
		c.Network.Namespace, c.Network.Name = a.Selection.Namespace, a.Selection.Name
	}
	return c
}

// cniArgsMap turns CNI_ARGS pairs into the object modules see; a later
// pair wins, as it does when CNI_ARGS is parsed.
func cniArgsMap(pairs [][2]string) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return m
}

func newPrepareInput(m *module, req *pipeline.PrepareRequest, keys map[string]json.RawMessage) *abi.PrepareRequest {
	a := req.Attachment
	in := &abi.PrepareRequest{
		Request: common(abi.HookPrepare, m, req.Pod, a, keys),
		Config:  a.Config, CNIArgs: cniArgsMap(a.CNIArgs), ConfigArgs: a.ConfigArgs,
	}
	if in.ConfigArgs == nil {
		in.ConfigArgs = map[string]any{}
	}
	return in
}

func newEnrichInput(m *module, req *pipeline.EnrichRequest, keys map[string]json.RawMessage) (*enrichInput, error) {
	a := req.Attachment
	in := &enrichInput{EnrichRequest: abi.EnrichRequest{Request: common(abi.HookEnrich, m, req.Pod, a, keys)}}
	var err error
	if in.Status, err = json.Marshal(req.Entry); err != nil {
		return nil, fmt.Errorf("encoding the status entry: %w", err)
	}
	if a.Result != nil {
		// Modules get one result format: CNI 1.0.0, whatever the delegate spoke.
		r, err := types100.NewResultFromResult(a.Result)
		if err != nil {
			return nil, fmt.Errorf("converting the %s result: %w", a.Result.Version(), err)
		}
		if in.Result, err = json.Marshal(r); err != nil {
			return nil, err
		}
	}
	if a.NAD != nil {
		in.NADAnnotations = a.NAD.Annotations
	}
	return in, nil
}
