package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/devinfo"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
)

// teardownTimeout bounds the undo after a failed ADD.
const teardownTimeout = 2 * time.Minute

// Del detaches every attachment ADD attempted, in reverse order, past
// failures (s7.2). It needs neither the pod, its NADs nor the source: the
// attachment record has everything. DEL of an unknown container succeeds.
func (p *Pipeline) Del(ctx context.Context, req *Request) error {
	switch own, err := p.checkNetNS(req); {
	case err != nil:
		// Delegates refuse a CNI_NETNS that is not a namespace (or is gone)
		// but clean up without one, as CNI's DEL allows.
		p.Log.Debug("CNI_NETNS is not a network namespace: detaching without it", "netns", req.NetNS, "err", err)
		r := *req
		r.NetNS = ""
		req = &r
	case own && !req.NetNSOverride:
		return ownNetNS(req)
	}
	unlock, err := p.Locks.Lock(ctx, req.ContainerID)
	if err != nil {
		return newError(codes.Record, req.podRef(), "", err)
	}
	if err := p.del(ctx, req); err != nil {
		unlock(false)
		return asCNIError(codes.DetachFailed, req.podRef(), "", err)
	}
	p.rememberDeleted(req)
	unlock(true)
	return nil
}

// rememberDeleted leaves a tombstone for the runtime's repeated DEL. Best
// effort: without it, that DEL runs the default network's delegates again.
func (p *Pipeline) rememberDeleted(req *Request) {
	if p.Deleted == nil || req.IfName == "" {
		return
	}
	if err := p.Deleted.Put(req.ContainerID, req.IfName); err != nil {
		p.Log.Warn("remembering the finished DEL", "err", err)
	}
}

// deletedBefore reports a DEL an earlier DEL already did: its tombstone
// names this interface and libcni caches nothing of the container (every
// successful delegate DEL removed its entry). A tombstone of this boot
// suffices, written after those removals, which only a node's crash loses;
// listing libcni's cache reads every attachment's name on the node.
func (p *Pipeline) deletedBefore(req *Request) bool {
	if p.Deleted == nil {
		return false
	}
	found, thisBoot := p.Deleted.Lookup(req.ContainerID, req.IfName)
	if !found || thisBoot {
		return found
	}
	cached, err := p.CNI.GetCachedAttachments(req.ContainerID)
	return err == nil && len(cached) == 0
}

// del is DEL with the container lock held.
func (p *Pipeline) del(ctx context.Context, req *Request) error {
	rec, err := p.Records.Load(req.ContainerID)
	switch {
	case errors.Is(err, record.ErrCorrupt):
		p.Log.Warn("attachment record unusable: detaching what libcni's cache knows", "err", err)
		if err := p.delFromCache(ctx, req); err != nil {
			return err
		}
		return p.Records.Remove(req.ContainerID)
	case err != nil:
		return err
	case rec == nil && p.deletedBefore(req):
		p.Log.Info("DEL repeated after a finished DEL of this container: nothing left to detach")
		return nil
	case rec == nil:
		return p.delFromCache(ctx, req)
	}
	trusted := p.Records.Trusted(rec)
	if err := p.teardown(ctx, req, rec); err != nil {
		return err
	}
	if !trusted {
		if err := p.delLeftovers(ctx, req); err != nil {
			return err
		}
	}
	p.removeStatus(ctx, rec)
	return nil
}

// teardown detaches the record's attempted attachments in reverse order,
// past failures, and keeps only the failed ones for the next DEL.
func (p *Pipeline) teardown(ctx context.Context, req *Request, rec *record.Record) error {
	if req.NetNS == "" {
		r := *req
		r.NetNS = rec.NetNS
		req = &r
	}
	failed, msgs := p.detachEach(ctx, req, rec.Attachments)
	if len(failed) == 0 {
		return p.Records.Remove(rec.ContainerID)
	}
	rec.Attachments = failed
	if err := p.Records.Save(rec); err != nil {
		msgs = append(msgs, "keeping the record of the failed ones: "+err.Error())
	}
	return newError(codes.DetachFailed, podOf(rec), "", fmt.Errorf("detaching %d of the container's networks failed: %s", len(failed), strings.Join(msgs, "; ")))
}

// detachEach detaches the attempted ones of atts in reverse order, past
// failures, and returns the failed ones in atts' order with their errors.
func (p *Pipeline) detachEach(ctx context.Context, req *Request, atts []record.Attachment) (failed []record.Attachment, msgs []string) {
	lists := parseAhead(atts)
	for _, a := range slices.Backward(atts) {
		parsed := <-lists
		if a.State == record.Planned {
			continue
		}
		err := p.detachList(ctx, req, &a, parsed)
		if err != nil && rejectedAgain(&a, err) {
			err = p.detachRejected(ctx, req, &a)
		}
		if err == nil && a.DeviceInfoFile != "" {
			// s4.2.1: on DEL; after the delegate, which may still read it.
			err = devinfo.Remove(a.DeviceInfoFile)
		}
		if err != nil {
			failed = append([]record.Attachment{a}, failed...)
			msgs = append(msgs, label(a.Name, a.IfName)+": "+err.Error())
		}
	}
	return failed, msgs
}

func podOf(rec *record.Record) string {
	if rec.Pod == nil {
		return ""
	}
	return rec.Pod.Namespace + "/" + rec.Pod.Name
}

// parseAhead parses the recorded lists of atts' attempted attachments and
// sends them in DEL's order, last first; a planned one's is empty. The
// last is parsed at once and the others on a goroutine, so that each parse
// overlaps the delegates before it, which mostly wait on the kernel.
func parseAhead(atts []record.Attachment) <-chan parsedList {
	lists := make(chan parsedList, len(atts))
	parse := func(a *record.Attachment) {
		var l parsedList
		if a.State != record.Planned {
			l.list, l.err = netconf.ConfList(a.Config)
		}
		lists <- l
	}
	if n := len(atts); n > 0 {
		parse(&atts[n-1])
		go func() {
			for i := n - 2; i >= 0; i-- {
				parse(&atts[i])
			}
		}()
	}
	return lists
}

// parsedList is a recorded list parsed, or why it could not be.
type parsedList struct {
	list *libcni.NetworkConfigList
	err  error
}

func (p *Pipeline) detachOne(ctx context.Context, req *Request, a *record.Attachment) error {
	list, err := netconf.ConfList(a.Config)
	return p.detachList(ctx, req, a, parsedList{list, err})
}

// detachList runs the DEL of a's list, parsed from its recorded config.
func (p *Pipeline) detachList(ctx context.Context, req *Request, a *record.Attachment, parsed parsedList) error {
	list, err := parsed.list, parsed.err
	if err != nil {
		return err
	}
	p.Log.Debug("delegate DEL", "network", a.Name, "interface", a.IfName)
	return p.delegateCall(ctx, func(ctx context.Context) error {
		return p.CNI.DelNetworkList(ctx, list, p.runtimeConf(req, a))
	})
}

// delLeftovers detaches what libcni's cache still holds for the container
// once the record's attachments are gone: nothing, unless the record is
// older than the attachments (a journal cut short; Store.Trusted).
func (p *Pipeline) delLeftovers(ctx context.Context, req *Request) error {
	if msgs, _ := p.delAllCached(ctx, req, true); len(msgs) > 0 {
		return newError(codes.DetachFailed, req.podRef(), "", fmt.Errorf("detaching attachments missing from the record: %s", strings.Join(msgs, "; ")))
	}
	return nil
}

// delFromCache is DEL without a usable record: every attachment libcni
// cached for the container, then the default network as configured now
// (harmless when it was never attached: DEL is idempotent).
func (p *Pipeline) delFromCache(ctx context.Context, req *Request) error {
	msgs, seenDefault := p.delAllCached(ctx, req, false)
	if !seenDefault && req.IfName != "" {
		if err := p.delDefault(ctx, req); err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return newError(codes.DetachFailed, req.podRef(), "", fmt.Errorf("detaching without a record: %s", strings.Join(msgs, "; ")))
	}
	return nil
}

// delAllCached detaches every attachment libcni caches for the container,
// last first, past failures (leftovers are logged). It returns the
// failures, and whether one was on req's interface.
func (p *Pipeline) delAllCached(ctx context.Context, req *Request, leftovers bool) (msgs []string, onIfName bool) {
	cached, err := p.CNI.GetCachedAttachments(req.ContainerID)
	if err != nil {
		p.Log.Warn("reading libcni's cache", "err", err)
	}
	for _, c := range slices.Backward(cached) {
		if leftovers {
			p.Log.Warn("detaching an attachment the record did not list", "network", c.Network, "interface", c.IfName)
		}
		onIfName = onIfName || c.IfName == req.IfName
		if err := p.delCached(ctx, req, c); err != nil {
			msgs = append(msgs, fmt.Sprintf("%s (%s): %v", c.Network, c.IfName, err))
		}
	}
	return msgs, onIfName
}

func (p *Pipeline) delCached(ctx context.Context, req *Request, c *libcni.NetworkAttachment) error {
	conf, err := netconf.Parse(c.Config)
	if err != nil {
		return err
	}
	if isPlexus(conf) {
		// A cacheDir shared with the runtime's: undoing it would recurse.
		p.Log.Warn("skipping plexus's own entry in libcni's cache: cacheDir is shared with the runtime's", "network", c.Network)
		return nil
	}
	list, err := netconf.ConfList(c.Config)
	if err != nil {
		return err
	}
	rt := &libcni.RuntimeConf{
		ContainerID: req.ContainerID, NetNS: req.NetNS, IfName: c.IfName,
		Args: c.CniArgs, CapabilityArgs: c.CapabilityArgs,
	}
	if err := p.delegateCall(ctx, func(ctx context.Context) error {
		return p.CNI.DelNetworkList(ctx, list, rt)
	}); err != nil {
		return err
	}
	return p.removeDeviceInfo(req.ContainerID, c.IfName)
}

// removeDeviceInfo deletes the attachment's CNI device-info file (s4.2.1)
// when the record naming it is lost: the container and interface give its
// path, and names that cannot form one have no file.
func (p *Pipeline) removeDeviceInfo(containerID, ifName string) error {
	path, err := devinfo.Files{Dir: p.Config.DeviceInfoDir}.CNIFile(containerID, ifName)
	if err != nil {
		return nil
	}
	return devinfo.Remove(path)
}

// delDefault is only possible for a default network from a file or from
// "delegates": DEL never needs the API.
func (p *Pipeline) delDefault(ctx context.Context, req *Request) error {
	if !isPath(p.Config.ClusterNetwork) && (p.Config.ClusterNetwork != "" || len(p.Config.Delegates) == 0) {
		return nil
	}
	c, err := p.loadClusterNetwork(ctx)
	if err != nil {
		p.Log.Warn("no record and no default network config: nothing to detach", "err", err)
		return nil
	}
	a := &record.Attachment{Name: c.name, IfName: req.IfName, Config: c.config, CNIArgs: delegateArgs(req.Args), CapabilityArgs: defaultCapabilityArgs(req.RuntimeConfig, c)}
	if err := p.detachOne(ctx, req, a); err != nil {
		return fmt.Errorf("default network %s (%s): %w", c.name, req.IfName, err)
	}
	return nil
}

func (p *Pipeline) removeStatus(ctx context.Context, rec *record.Record) {
	r, ok := p.Source.(source.StatusRemover)
	if !ok || rec.Pod == nil {
		return
	}
	if err := r.RemoveStatus(ctx, rec.Pod.Namespace, rec.Pod.Name); err != nil {
		p.Log.Warn("removing network-status", "pod", podOf(rec), "err", err)
	}
}
