package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// Update outcomes that are not failures: nothing was changed.
var (
	ErrNoRecord = errors.New("no attachment record: the pod's ADD has not completed or its DEL has run")
	// ErrNotSettled: the record's default network is not attached.
	ErrNotSettled = errors.New("the pod's ADD did not complete")
)

// Change is what Update did to a running pod.
type Change struct {
	Attached []string // "namespace/name (ifName)"
	Detached []string
	// Republished: only network-status was written, as it did not list
	// the record's attachments (a crash between attach and publish).
	Republished bool
}

// Update brings a running pod's secondary attachments in line with its
// selection annotation now (dynamic attachments; the spec's open question
// 2): it detaches what is no longer selected and attaches what is new
// (DiffAttachments), never the default network. req names the sandbox and
// its netns; the rest comes from the record. New attachments go through
// ADD's stages under the container's lock (s7.3), recorded before their
// delegate runs. A failure restores the pod's attachments and returns a
// CNI error whose code says why.
func (p *Pipeline) Update(ctx context.Context, req *Request, pod *source.Pod) (ch *Change, err error) {
	err = p.withSettled(ctx, req.ContainerID, pod, func(rec *record.Record) error {
		def := defaultOf(rec)
		r := *req
		r.IfName, r.Args = def.IfName, def.CNIArgs
		ch, err = p.update(ctx, &r, pod, rec)
		return err
	})
	return ch, err
}

func defaultOf(rec *record.Record) *record.Attachment {
	i := slices.IndexFunc(rec.Attachments, func(a record.Attachment) bool { return a.Default })
	if i < 0 {
		return nil
	}
	return &rec.Attachments[i]
}

func (p *Pipeline) update(ctx context.Context, req *Request, pod *source.Pod, rec *record.Record) (*Change, error) {
	res, err := selection.ParseWith(pod.Annotations[selection.Annotation], pod.Namespace, p.ParseOptions())
	if err != nil {
		// s4.1: an invalid annotation is ignored; here that keeps what the
		// pod has rather than detaching everything.
		return nil, p.refuse(ctx, pod, newError(codes.InvalidSelection, pod.Ref(), "", fmt.Errorf("%w; the pod's attachments are left as they are", err)))
	}
	els := res.Elements
	d, err := DiffAttachments(rec, els)
	if err != nil {
		return nil, p.refuse(ctx, pod, newError(codes.InterfaceConflict, pod.Ref(), "", err))
	}
	if d.Empty() {
		wrote, err := p.republishIfStale(ctx, pod, rec)
		if err != nil {
			return nil, err
		}
		return &Change{Republished: wrote}, nil
	}
	pl, err := p.planUpdate(ctx, req, pod, els, d)
	if err != nil {
		return nil, err
	}
	ch := &Change{}
	// Where each attachment is now, by label: a rollback puts them back.
	order := map[string]int{}
	for i, a := range rec.Attachments {
		order[label(a.Name, a.IfName)] = i
	}
	detached, err := p.detachRemoved(ctx, req, rec, d, ch)
	if err != nil {
		return &Change{}, p.rollbackUpdate(ctx, req, pl, rec, order, 0, detached, err)
	}
	rec.Attachments = append(rec.Attachments, pl.record.Attachments...)
	if err := p.attachAll(ctx, req, pl, rec); err != nil {
		return &Change{}, p.rollbackUpdate(ctx, req, pl, rec, order, len(pl.attachments), detached, err)
	}
	for _, a := range pl.attachments {
		ch.Attached = append(ch.Attached, label(a.Name, a.IfName))
	}
	rec.Attachments = ordered(rec, els, d)
	if err := p.Records.Save(rec); err != nil {
		return ch, newError(codes.Record, pod.Ref(), "", err)
	}
	if err := p.publishUpdate(ctx, pod, rec, pl); err != nil {
		return ch, err
	}
	p.changeEvents(ctx, pod, ch)
	return ch, nil
}

// planUpdate runs every stage before delegation for the new elements; a
// failure changes nothing.
func (p *Pipeline) planUpdate(ctx context.Context, req *Request, pod *source.Pod, els []*selection.Element, d *Diff) (*plan, error) {
	pl := &plan{pod: pod, selections: els}
	var adds []*selection.Element
	var ifNames []string
	for _, i := range d.Attach {
		adds, ifNames = append(adds, els[i]), append(ifNames, d.IfNames[i])
	}
	if err := p.addSelections(ctx, req, pl, adds, ifNames); err != nil {
		return nil, err
	}
	for _, a := range pl.attachments {
		if err := refuseDeviceHotplug(pod, a); err != nil {
			return nil, p.refuse(ctx, pod, err)
		}
	}
	if err := p.runStages(ctx, pl); err != nil {
		return nil, err
	}
	if err := p.buildRecord(req, pl); err != nil {
		return nil, err
	}
	return pl, nil
}

// detachRemoved undoes the attachments no longer selected, last first, and
// saves the record without them; it stops at the first failure.
func (p *Pipeline) detachRemoved(ctx context.Context, req *Request, rec *record.Record, d *Diff, ch *Change) ([]record.Attachment, error) {
	var detached []record.Attachment
	var failure error
	for _, j := range slices.Backward(d.Detach) { // last first: j indexes rec still
		a := rec.Attachments[j]
		if err := p.detachOne(ctx, req, &a); err != nil {
			failure = newError(codes.DetachFailed, podOf(rec), label(a.Name, a.IfName), err)
			break
		}
		rec.Attachments = slices.Delete(rec.Attachments, j, j+1)
		detached = append(detached, a)
		ch.Detached = append(ch.Detached, label(a.Name, a.IfName))
	}
	if len(detached) == 0 {
		return nil, failure
	}
	if err := p.Records.Save(rec); err != nil && failure == nil {
		failure = newError(codes.Record, podOf(rec), "", err)
	}
	return detached, failure
}

// rollbackUpdate undoes a failed Update: the added attachments (the
// record's last) are detached and the detached ones attached again.
func (p *Pipeline) rollbackUpdate(ctx context.Context, req *Request, pl *plan, rec *record.Record, order map[string]int, added int, detached []record.Attachment, cause error) error {
	te := asCNIError(codes.AttachFailed, pl.pod.Ref(), "", cause)
	reason := "NetworkAttachFailed"
	if te.Code == codes.DetachFailed {
		reason = "NetworkDetachFailed"
	}
	p.Log.Error("changing the pod's attachments failed: restoring them", "pod", pl.pod.Ref(), "err", te.Msg)
	p.event(ctx, pl.pod, source.EventWarning, reason, te.Msg+"; the pod's attachments are left as they were")
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	base := len(rec.Attachments) - added
	failed, msgs := p.detachEach(dctx, req, rec.Attachments[base:])
	rec.Attachments = append(rec.Attachments[:base:base], failed...)
	results := map[string]types.Result{}
	for i := len(detached) - 1; i >= 0; i-- {
		a := detached[i]
		a.State = record.Attempted
		rec.Attachments = append(rec.Attachments, a)
		if err := p.Records.Save(rec); err != nil {
			msgs = append(msgs, err.Error())
		}
		list, err := netconf.ConfList(a.Config)
		var res types.Result
		if err == nil {
			res, err = p.attachOne(dctx, req, &rec.Attachments[len(rec.Attachments)-1], list)
		}
		if err != nil {
			msgs = append(msgs, "re-attaching "+label(a.Name, a.IfName)+": "+err.Error())
			continue
		}
		rec.Attachments[len(rec.Attachments)-1].State = record.Attached
		results[label(a.Name, a.IfName)] = res
	}
	sort.SliceStable(rec.Attachments, func(i, j int) bool {
		a, b := rec.Attachments[i], rec.Attachments[j]
		return order[label(a.Name, a.IfName)] < order[label(b.Name, b.IfName)]
	})
	if err := p.Records.Save(rec); err != nil {
		msgs = append(msgs, err.Error())
	}
	if len(results) > 0 {
		// Re-attached interfaces may have new addresses.
		if err := p.publishRestored(dctx, pl.pod, rec, results); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		te.Details = "restoring the pod's attachments also failed: " + labels(msgs)
	}
	return te
}

// publishRestored writes network-status after a rollback re-attached some.
func (p *Pipeline) publishRestored(ctx context.Context, pod *source.Pod, rec *record.Record, results map[string]types.Result) error {
	known := publishedEntries(pod)
	for _, ra := range rec.Attachments {
		if res, ok := results[label(ra.Name, ra.IfName)]; ok {
			e, err := status.FromResult(ra.Name, ra.IfName, ra.Default, res)
			if err != nil {
				return err
			}
			known[label(ra.Name, ra.IfName)] = e
		}
	}
	return p.writeStatus(ctx, pod, rec, known, false)
}

// ordered is the record's attachments in the order ADD would have made
// them for the selection now: the default network, then the elements'.
func ordered(rec *record.Record, els []*selection.Element, d *Diff) []record.Attachment {
	pos := func(a record.Attachment) int {
		if a.Default || a.Fixed {
			return -1 // the default network, then defaultNetworks, as ADD made them
		}
		for i, el := range els {
			if el.Ref() == a.Name && d.IfNames[i] == a.IfName {
				return i
			}
		}
		return len(els)
	}
	out := append([]record.Attachment(nil), rec.Attachments...)
	sort.SliceStable(out, func(i, j int) bool { return pos(out[i]) < pos(out[j]) })
	return out
}

// publishUpdate writes network-status: the published entries of the kept
// attachments (with what the enricher added), new ones from the results.
func (p *Pipeline) publishUpdate(ctx context.Context, pod *source.Pod, rec *record.Record, pl *plan) error {
	known := publishedEntries(pod)
	for _, a := range pl.attachments {
		e, err := p.freshEntry(ctx, pl, a)
		if err != nil {
			return newError(codes.Status, pod.Ref(), a.Name, err)
		}
		known[label(a.Name, a.IfName)] = e
	}
	return p.writeStatus(ctx, pod, rec, known, false)
}

// cachedEntry is an entry the pod's status lacks, from libcni's cached result.
func (p *Pipeline) cachedEntry(pod *source.Pod, rec *record.Record, ra record.Attachment) *status.Entry {
	var res types.Result
	if list, err := netconf.ConfList(ra.Config); err == nil {
		res, _ = p.CNI.GetNetworkListCachedResult(list, &libcni.RuntimeConf{ContainerID: rec.ContainerID, IfName: ra.IfName})
	}
	e, err := status.FromResult(ra.Name, ra.IfName, ra.Default, res)
	if err != nil {
		p.Log.Warn("network-status entry from libcni's cache", "pod", pod.Ref(), "network", ra.Name, "err", err)
		return status.Minimal(ra.Name, ra.IfName, ra.Default)
	}
	return e
}

// publishedEntries are the pod's network-status entries by "name
// (interface)", with bare addresses in "ips" (s5.3.3).
func publishedEntries(pod *source.Pod) map[string]*status.Entry {
	out := map[string]*status.Entry{}
	var list []*status.Entry
	if json.Unmarshal([]byte(pod.Annotations[status.Annotation]), &list) != nil {
		return out
	}
	for _, e := range list {
		if e != nil {
			e.BareIPs()
			out[label(e.Name, e.Interface)] = e
		}
	}
	return out
}

// withSettled runs fn under the container's lock (s7.3) with its record,
// when that is the pod's and its ADD completed.
func (p *Pipeline) withSettled(ctx context.Context, containerID string, pod *source.Pod, fn func(*record.Record) error) error {
	unlock, err := p.Locks.Lock(ctx, containerID)
	if err != nil {
		return newError(codes.Record, pod.Ref(), "", err)
	}
	defer func() { unlock(!p.hasRecord(containerID)) }()
	rec, err := p.Records.Load(containerID)
	switch {
	case err != nil:
		return newError(codes.Record, pod.Ref(), "", err)
	case rec == nil:
		return ErrNoRecord
	case rec.Pod == nil || rec.Pod.UID != pod.UID:
		return newError(codes.PodLookup, pod.Ref(), "", fmt.Errorf("container %s was attached for another pod (record %+v, pod UID %s)", containerID, rec.Pod, pod.UID))
	}
	if def := defaultOf(rec); def == nil || def.State != record.Attached {
		return ErrNotSettled
	}
	return fn(rec)
}

// Republish writes the pod's network-status (s5) from the container's
// record, under its lock, when the status does not list exactly the
// record's attachments (plexusd stopped between answering an ADD and
// publishing), and reports whether it wrote. Published entries keep what
// was added to them. ErrNoRecord and ErrNotSettled as for Update.
func (p *Pipeline) Republish(ctx context.Context, containerID string, pod *source.Pod) (wrote bool, err error) {
	err = p.withSettled(ctx, containerID, pod, func(rec *record.Record) error {
		wrote, err = p.republishIfStale(ctx, pod, rec)
		return err
	})
	return wrote, err
}

// republishIfStale writes network-status when it does not list exactly
// the record's attachments, and reports whether it wrote.
func (p *Pipeline) republishIfStale(ctx context.Context, pod *source.Pod, rec *record.Record) (bool, error) {
	if statusCurrent(pod, rec) {
		return false, nil
	}
	if err := p.writeStatus(ctx, pod, rec, publishedEntries(pod), false); err != nil {
		return false, err
	}
	return true, nil
}

// refuse reports a change that was not made, where no stage reported it.
func (p *Pipeline) refuse(ctx context.Context, pod *source.Pod, err *types.Error) error {
	p.event(ctx, pod, source.EventWarning, "NetworkChangeFailed", err.Msg)
	return err
}

func (p *Pipeline) changeEvents(ctx context.Context, pod *source.Pod, ch *Change) {
	if len(ch.Detached) > 0 {
		p.event(ctx, pod, source.EventNormal, "RemovedInterfaces", "detached "+labels(ch.Detached))
	}
	if len(ch.Attached) > 0 {
		p.event(ctx, pod, source.EventNormal, "AddedInterfaces", "attached "+labels(ch.Attached))
	}
}

// NeedsUpdate tells, without the lock, delegates or the API, whether
// Update would do something: the selection is invalid or differs from a
// settled record, or network-status does not list its attachments. opts
// are the config's (Pipeline.ParseOptions).
func NeedsUpdate(rec *record.Record, pod *source.Pod, opts selection.ParseOptions) bool {
	if def := defaultOf(rec); def == nil || def.State != record.Attached {
		return false
	}
	res, err := selection.ParseWith(pod.Annotations[selection.Annotation], pod.Namespace, opts)
	if err != nil {
		return true
	}
	d, err := DiffAttachments(rec, res.Elements)
	if err != nil || !d.Empty() {
		return true
	}
	return !statusCurrent(pod, rec)
}

// statusCurrent: network-status lists the record's networks by name (a
// delegate may report no interface), with bare "ips" (s5.3.3).
func statusCurrent(pod *source.Pod, rec *record.Record) bool {
	var list []*status.Entry
	if json.Unmarshal([]byte(pod.Annotations[status.Annotation]), &list) != nil || len(list) != len(rec.Attachments) {
		return false
	}
	count := map[string]int{}
	for _, e := range list {
		if e != nil {
			if e.BareIPs() {
				return false
			}
			count[e.Name]++
		}
	}
	for _, ra := range rec.Attachments {
		count[ra.Name]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// refuseDeviceHotplug refuses to add a device network to a running pod:
// its devices were allocated at start, and Update does not track which
// the other attachments hold, so it could pick none or one in use.
func refuseDeviceHotplug(pod *source.Pod, a *Attachment) *types.Error {
	if a.NAD == nil || (a.NAD.Annotations[ResourceNameAnnotation] == "" && a.NAD.Annotations[ResourceClaimAnnotation] == "") {
		return nil
	}
	return newError(codes.InvalidSelection, pod.Ref(), a.Name, fmt.Errorf("network %s uses devices (%s or %s): device networks are attached when the pod starts, not added to a running pod", a.Name, ResourceNameAnnotation, ResourceClaimAnnotation))
}
