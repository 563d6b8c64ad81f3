package pipeline

import (
	"context"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// PlanOptions say where Plan departs from the ADD's own plan step.
type PlanOptions struct {
	// All plans past a failure, so that every problem is found; the first
	// failure stays Plan's error. Later steps leave out what failed.
	All bool
	// OffNode plans away from the node (plexusctl explain): a clusterNetwork
	// file or directory is not read, a NAD without spec.config is left
	// unresolved (s3.4.1 rules 2-3 read the node's confDir), and devices
	// are not assigned, only the NADs' device annotations checked.
	OffNode bool
}

// Plan is what an ADD decides before any delegate runs, read-only: the
// pod's default network, the config's defaultNetworks and the pod's
// selections, each with its interface, NAD, config and policy decision.
type Plan struct {
	Pod *source.Pod // nil without a pod to read (the default network only)
	// Selection is the networks annotation as parsed (s4.1); SelectionErr
	// says why it is invalid (ignored, or the ADD's error with strictSelection).
	Selection    *selection.Result
	SelectionErr error
	// Default is the cluster-wide default network (s6) or the one the pod's
	// v1.multus-cni.io/default-network annotation names.
	Default         *Planned
	DefaultNetworks []*Planned
	Selections      []*Planned // in selection order
	// Failed is the attachment the ADD fails on; nil when it does not fail
	// or fails for the pod as a whole.
	Failed *Planned
	// Errs are the failures in the order the ADD meets them: the first is
	// the ADD's, the others only PlanOptions.All finds.
	Errs []*types.Error
}

// Planned is one attachment as planned: a copy, which changes no ADD.
type Planned struct {
	Attachment
	// ConfigSource is where the config came from (s3.4.1): "spec.config"
	// or a file; "" when the NAD was not resolved.
	ConfigSource string
	// Unread says what a plan off the node could not read; Config is then nil.
	Unread string
	// Decision is the s7.4 policy's; nil when it was not asked.
	Decision *Decision
	Warnings []string // what the extensions told the pod's owner
	// Err is the attachment's failure; the first of all is the ADD's.
	Err *types.Error
}

// Plan makes the plan an ADD would make for req and returns it with the
// ADD's *types.Error; nothing is locked, recorded, attached or waited for.
func (p *Pipeline) Plan(ctx context.Context, req *Request, opts PlanOptions) (*Plan, error) {
	pl := &plan{opts: opts}
	if err := p.makePlan(ctx, req, pl); err != nil && pl.err == nil {
		pl.err = err
	}
	return pl.view(), pl.err
}

// note is the Planned that Plan shows of a, but for the copy of a (view).
func (pl *plan) note(a *Attachment) *Planned {
	if pl.notes == nil {
		pl.notes = map[*Attachment]*Planned{}
	}
	n := pl.notes[a]
	if n == nil {
		n = &Planned{}
		pl.notes[a] = n
	}
	return n
}

// fail records a failure of attachment a (nil: of the pod) and returns
// it, or nil with PlanOptions.All, where the plan goes on.
func (pl *plan) fail(a *Attachment, te *types.Error) error {
	if pl.err == nil {
		pl.err = te
	}
	pl.errs = append(pl.errs, te)
	if a != nil {
		pl.note(a).Err = te
	}
	if pl.opts.All {
		return nil
	}
	return te
}

// stop records a failure of the pod after which nothing can be planned.
func (pl *plan) stop(te *types.Error) error {
	pl.fail(nil, te)
	return te
}

// failed: a failed in an earlier step, which later steps leave it out of.
func (pl *plan) failed(a *Attachment) bool {
	n := pl.notes[a]
	return n != nil && n.Err != nil
}

// skip: a step needing a's config leaves it out (failed, or config on the node).
func (pl *plan) skip(a *Attachment) bool {
	n := pl.notes[a]
	return n != nil && (n.Err != nil || n.Unread != "")
}

// view is the read-only Plan.
func (pl *plan) view() *Plan {
	v := &Plan{Pod: pl.pod, Selection: pl.parsed, SelectionErr: pl.parseErr, Errs: pl.errs}
	for _, a := range pl.attachments {
		pa := pl.note(a)
		pa.Attachment = *a
		switch {
		case a.Default:
			v.Default = pa
		case a.Origin == OriginDefaultNetworks:
			v.DefaultNetworks = append(v.DefaultNetworks, pa)
		default:
			v.Selections = append(v.Selections, pa)
		}
		if pa.Err != nil && error(pa.Err) == pl.err {
			v.Failed = pa
		}
	}
	return v
}
