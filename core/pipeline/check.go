package pipeline

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/record"
)

// Check runs CHECK on every attachment ADD made, in ADD order. Delegate
// configs older than 0.4.0 have no CHECK and are skipped.
func (p *Pipeline) Check(ctx context.Context, req *Request) error {
	unlock, err := p.Locks.Lock(ctx, req.ContainerID)
	if err != nil {
		return newError(codes.Record, req.podRef(), "", err)
	}
	defer unlock(false)
	rec, err := p.Records.Load(req.ContainerID)
	if err != nil {
		return newError(codes.Record, req.podRef(), "", err)
	}
	if rec == nil {
		return newError(codes.CheckFailed, req.podRef(), "", fmt.Errorf("container %s has no attachment record: was it added?", req.ContainerID))
	}
	for i := range rec.Attachments {
		a := &rec.Attachments[i]
		if a.State != record.Attached {
			return newError(codes.CheckFailed, podOf(rec), a.Name, fmt.Errorf("attachment %s was never completed", a.IfName))
		}
		if err := p.checkOne(ctx, req, a); err != nil {
			return newError(codes.CheckFailed, podOf(rec), label(a.Name, a.IfName), err)
		}
	}
	return nil
}

func (p *Pipeline) checkOne(ctx context.Context, req *Request, a *record.Attachment) error {
	list, err := netconf.ConfList(a.Config)
	if err != nil {
		return err
	}
	if ok, _ := version.GreaterThanOrEqualTo(list.CNIVersion, "0.4.0"); !ok {
		p.Log.Debug("CHECK skipped: delegate config predates 0.4.0", "network", a.Name)
		return nil
	}
	return p.delegateCall(ctx, func(ctx context.Context) error {
		return p.CNI.CheckNetworkList(ctx, list, p.runtimeConf(req, a))
	})
}
