package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/plexus-cni/plexus/core/pipeline"
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
