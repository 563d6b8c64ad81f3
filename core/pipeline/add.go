package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// Add attaches the default network, then every selected network (s6.2),
// publishes network-status (s5) and returns the default network's result in
// the runtime's cniVersion. On failure nothing stays attached (s7.2).
func (p *Pipeline) Add(ctx context.Context, req *Request) (types.Result, error) {
	own, err := p.checkNetNS(req)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("pod %s: CNI_NETNS %q is not a network namespace: %v", req.podRef(), req.NetNS, err), "")
	}
	if own && !req.NetNSOverride {
		return nil, ownNetNS(req)
	}
	unlock, err := p.Locks.Lock(ctx, req.ContainerID)
	if err != nil {
		return nil, newError(codes.Record, req.podRef(), "", err)
	}
	// The lock file lives as long as the record: a successful ADD saved
	// one, a failed ADD leaves neither.
	var res types.Result
	defer func() { unlock(err != nil && !p.hasRecord(req.ContainerID)) }()
	res, err = p.add(ctx, req)
	return res, err
}

func (p *Pipeline) hasRecord(containerID string) bool {
	rec, err := p.Records.Load(containerID)
	return rec != nil || err != nil
}

func (p *Pipeline) add(ctx context.Context, req *Request) (types.Result, error) {
	// From here on the container has attachments again: a later DEL
	// without a record must not take it for a repeat of an earlier one.
	if p.Deleted != nil {
		if err := p.Deleted.Remove(req.ContainerID); err != nil {
			return nil, newError(codes.Record, req.podRef(), "", err)
		}
	}
	// A repeated ADD without DEL: undo the earlier attachments first, so
	// nothing is attached twice and no lease is held twice.
	if err := p.undoPrevious(ctx, req); err != nil {
		return nil, err
	}
	if err := p.awaitReadiness(ctx); err != nil {
		return nil, newError(codes.ClusterNetwork, req.podRef(), "", err)
	}
	pl := &plan{}
	if err := p.makePlan(ctx, req, pl); err != nil {
		return nil, err
	}
	if err := p.attachAll(ctx, req, pl, pl.record); err != nil {
		return nil, p.rollback(ctx, req, pl, err)
	}
	if err := p.setDefaultRoutes(ctx, req, pl); err != nil {
		return nil, p.rollback(ctx, req, pl, err)
	}
	if err := p.publish(ctx, req, pl); err != nil {
		return nil, p.rollback(ctx, req, pl, err)
	}
	return defaultResult(pl.attachments[0].Result, req.CNIVersion)
}

func (p *Pipeline) undoPrevious(ctx context.Context, req *Request) error {
	prev, err := p.Records.Load(req.ContainerID)
	if err != nil && !errors.Is(err, record.ErrCorrupt) {
		return newError(codes.Record, req.podRef(), "", err)
	}
	if prev == nil && err == nil {
		return nil
	}
	p.Log.Warn("ADD for a container that is already attached: detaching the earlier attachments first")
	if err := p.del(ctx, req); err != nil {
		return asCNIError(codes.DetachFailed, req.podRef(), "", err)
	}
	return nil
}

// attachAll runs each planned attachment's delegate in order, for ADD and
// Update: rec ends with their entries. Each is recorded as attempted
// before it starts, so a crash leaves a record DEL can work from; that
// save also records the previous one as done.
func (p *Pipeline) attachAll(ctx context.Context, req *Request, pl *plan, rec *record.Record) *types.Error {
	base := len(rec.Attachments) - len(pl.attachments)
	for i, a := range pl.attachments {
		if err := p.attachStep(ctx, req, pl, a, rec, &rec.Attachments[base+i], pl.lists[i]); err != nil {
			return err
		}
	}
	if err := p.Records.Save(rec); err != nil {
		return newError(codes.Record, req.podRef(), "", err)
	}
	return nil
}

// attachStep runs a's delegate: its entry ra is saved as attempted first
// and marked attached once verified, which the caller's next save records.
func (p *Pipeline) attachStep(ctx context.Context, req *Request, pl *plan, a *Attachment, rec *record.Record, ra *record.Attachment, list *libcni.NetworkConfigList) *types.Error {
	podRef := req.podRef()
	ra.State = record.Attempted
	if err := p.Records.Save(rec); err != nil {
		ra.State = record.Planned
		return newError(codes.Record, podRef, a.Name, err)
	}
	if err := prepareDeviceInfo(a); err != nil {
		return newError(codes.Devices, podRef, attachmentLabel(a), err)
	}
	res, err := p.attachOne(ctx, req, ra, list)
	if err != nil {
		ra.Rejected = delegateRejection(err)
		return newError(codes.AttachFailed, podRef, attachmentLabel(a), err)
	}
	a.Result = res
	if err := verifyRequested(a); err != nil {
		return newError(codes.NotHonored, podRef, attachmentLabel(a), err)
	}
	ra.State = record.Attached
	return nil
}

func attachmentLabel(a *Attachment) string {
	if a.Default {
		return a.Name + " (default, " + a.IfName + ")"
	}
	return a.Name + " (" + a.IfName + ")"
}

func (p *Pipeline) attachOne(ctx context.Context, req *Request, ra *record.Attachment, list *libcni.NetworkConfigList) (types.Result, error) {
	p.Log.Debug("delegate ADD", "network", ra.Name, "interface", ra.IfName, "plugins", len(list.Plugins))
	var res types.Result
	err := p.delegateCall(ctx, func(ctx context.Context) (err error) {
		res, err = p.CNI.AddNetworkList(ctx, list, p.runtimeConf(req, ra))
		return err
	})
	return res, err
}

// rollback undoes every attempted attachment after a failed ADD (s7.2).
func (p *Pipeline) rollback(ctx context.Context, req *Request, pl *plan, cause *types.Error) error {
	p.Log.Error("ADD failed: detaching what was attached", "err", cause.Msg)
	p.event(ctx, pl.pod, source.EventWarning, "NetworkAttachFailed", cause.Msg)
	// Teardown must run even when the ADD's own context has expired.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	if err := p.teardown(dctx, req, pl.record); err != nil {
		cause.Details = "teardown after the failure also failed: " + err.Error()
	}
	return cause
}

// verifyRequested makes sure requested ips and mac are on the attachment's
// sandbox interface in the result (s4.1.2.1.3.2, s4.1.2.1.4.2): a delegate
// may ignore CNI args, the spec's requirement may not be.
func verifyRequested(a *Attachment) error {
	if a.Selection == nil || (len(a.Selection.IPs) == 0 && a.Selection.MAC == "") {
		return nil
	}
	if a.Result == nil {
		return errors.New("the delegate returned no result, so the requested ips/mac cannot be confirmed")
	}
	got, mac, err := status.AddressesOn(a.Result)
	if err != nil {
		return err
	}
	for _, want := range a.Selection.IPs {
		if !slices.ContainsFunc(got, requestedIP(want).Equal) {
			return fmt.Errorf("requested IP %s was not assigned (result has %s); the delegate may not support the \"ips\" argument", want, listOrNone(got))
		}
	}
	if a.Selection.MAC != "" {
		want, _ := net.ParseMAC(a.Selection.MAC)
		have, err := net.ParseMAC(mac)
		if err != nil || !bytes.Equal(want, have) {
			return fmt.Errorf("requested MAC %s was not assigned (result has %q); the delegate may not support the \"mac\" argument", a.Selection.MAC, mac)
		}
	}
	return nil
}

func requestedIP(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil {
		return ip
	}
	ip, _, _ := net.ParseCIDR(s)
	return ip
}

// listOrNone joins the values' texts with commas, or says "none".
func listOrNone[T fmt.Stringer](vs []T) string {
	if len(vs) == 0 {
		return "none"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, ", ")
}

// publish builds the status list (s5), enriched, and hands it to the source.
func (p *Pipeline) publish(ctx context.Context, req *Request, pl *plan) *types.Error {
	podRef := req.podRef()
	entries := map[string]*status.Entry{}
	for _, a := range pl.attachments {
		e, err := p.freshEntry(ctx, pl, a)
		if err == nil {
			err = compatStatus(a, e)
		}
		if err != nil {
			return newError(codes.Status, podRef, a.Name, err)
		}
		entries[label(a.Name, a.IfName)] = e
	}
	if pl.pod == nil {
		return nil
	}
	if err := p.writeStatus(ctx, pl.pod, pl.record, entries, true); err != nil {
		return asCNIError(codes.Status, podRef, "", err)
	}
	return nil
}

// writeStatus is the one way network-status (s5) is written, by ADD,
// Update and Republish: rec's attachments in order, each with its entry
// in known (by label) or else from libcni's cached result. With added,
// the AddedInterfaces event goes out beside it.
func (p *Pipeline) writeStatus(ctx context.Context, pod *source.Pod, rec *record.Record, known map[string]*status.Entry, added bool) error {
	entries := make([]*status.Entry, 0, len(rec.Attachments))
	for _, ra := range rec.Attachments {
		e, ok := known[label(ra.Name, ra.IfName)]
		if !ok {
			e = p.cachedEntry(pod, rec, ra)
		}
		entries = append(entries, e)
	}
	doc, err := status.Marshal(entries)
	if err != nil {
		return newError(codes.Status, pod.Ref(), "", err)
	}
	if added {
		// Beside the PATCH, not after it: in thin mode each is a round trip
		// the runtime waits for. A failed PATCH's rollback event follows.
		sent := p.eventAsync(ctx, pod, source.EventNormal, "AddedInterfaces", summary(entries))
		defer sent()
	}
	if err := p.Source.PublishStatus(ctx, pod, doc); err != nil {
		return newError(codes.Status, pod.Ref(), "", fmt.Errorf("publishing %s: %w", status.Annotation, err))
	}
	return nil
}

// freshEntry is the entry from a's result, with device-info and enrichment.
func (p *Pipeline) freshEntry(ctx context.Context, pl *plan, a *Attachment) (*status.Entry, error) {
	e, err := status.FromResult(a.Name, a.IfName, a.Default, a.Result)
	if err != nil {
		return nil, err
	}
	p.addDeviceInfo(ctx, pl, a, e)
	p.enrich(ctx, pl.pod, a, e)
	return e, nil
}

func (p *Pipeline) enrich(ctx context.Context, pod *source.Pod, a *Attachment, e *status.Entry) {
	if p.Stages.Enricher == nil || pod == nil {
		return
	}
	warn := func(msg string) {
		p.Log.Warn(msg, "pod", pod.Ref(), "network", a.Name)
		p.event(ctx, pod, source.EventWarning, "NetworkExtensionWarning", fmt.Sprintf("network %s: %s", a.Name, msg))
	}
	if err := p.Stages.Enricher.Enrich(ctx, &EnrichRequest{Pod: pod, Attachment: a, Entry: e, Warn: warn}); err != nil {
		warn("status enrichment failed: " + err.Error())
	}
}

// summary is the Normal event's text: every interface with its network.
func summary(entries []*status.Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		s := fmt.Sprintf("%s from %s", e.Interface, e.Name)
		if len(e.IPs) > 0 {
			s += " [" + strings.Join(e.IPs, " ") + "]"
		}
		parts[i] = s
	}
	return "attached " + strings.Join(parts, ", ")
}

// defaultResult is the default network's result (or an empty one) in cniVersion.
func defaultResult(res types.Result, cniVersion string) (types.Result, error) {
	if res == nil {
		res = &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	}
	if cniVersion == "" {
		return res, nil
	}
	out, err := res.GetAsVersion(cniVersion)
	if err != nil {
		return nil, newError(codes.AttachFailed, "", "", fmt.Errorf("converting the default network's %s result to %s: %w", res.Version(), cniVersion, err))
	}
	return out, nil
}
