package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/record"
)

// GC (CNI 1.1) detaches the containers with a record that are not among
// the runtime's valid attachments, then GCs every delegate network with
// its own valid pairs, so live secondary interfaces survive.
func (p *Pipeline) GC(ctx context.Context, valid []types.GCAttachment) error {
	live := map[string]bool{}
	for _, v := range valid {
		live[v.ContainerID] = true
	}
	ids, err := p.Records.List()
	if err != nil {
		return newError(codes.GarbageCollection, "", "", err)
	}
	var errs []error
	nets := map[string]*libcni.NetworkConfigList{}
	pairs := map[string][]types.GCAttachment{}
	for _, id := range ids {
		if !live[id] {
			// The call's logger names no container (GC has none): this DEL's does.
			stale := *p
			stale.Log = p.Log.With("container", id)
			if err := stale.Del(ctx, &Request{ContainerID: id}); err != nil {
				errs = append(errs, fmt.Errorf("stale container %s: %w", id, err))
			}
			continue
		}
		p.collectLive(id, nets, pairs)
	}
	if p.Deleted != nil {
		if err := p.Deleted.Prune(func(id string) bool { return live[id] }); err != nil {
			errs = append(errs, err)
		}
	}
	p.addClusterNetwork(ctx, nets)
	for name, list := range nets {
		if err := p.CNI.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: pairs[name]}); err != nil {
			errs = append(errs, fmt.Errorf("network %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return newError(codes.GarbageCollection, "", "", err)
	}
	return nil
}

// Collect detaches a stale container as GC does, for runtimes that never
// send GC (containerd 1.6, 2.x). stale is asked again under the
// container's lock (s7.3), since an ADD or DEL may have changed the record
// meanwhile; false leaves it alone. It reports whether it detached.
func (p *Pipeline) Collect(ctx context.Context, id string, stale func() bool) (bool, error) {
	unlock, err := p.Locks.Lock(ctx, id)
	if err != nil {
		return false, newError(codes.GarbageCollection, "", "", err)
	}
	if !stale() {
		unlock(!p.hasRecord(id)) // the lock file goes with the record, as in ADD
		return false, nil
	}
	if err := p.del(ctx, &Request{ContainerID: id}); err != nil {
		unlock(false)
		return false, asCNIError(codes.DetachFailed, "", "", err)
	}
	unlock(true)
	return true, nil
}

// collectLive adds a live container's delegate networks and their pairs.
func (p *Pipeline) collectLive(id string, nets map[string]*libcni.NetworkConfigList, pairs map[string][]types.GCAttachment) {
	rec, err := p.Records.Load(id)
	if err != nil || rec == nil {
		p.Log.Warn("GC: record unreadable, its networks keep their state", "container", id, "err", err)
		return
	}
	for _, a := range rec.Attachments {
		if a.State == record.Planned {
			continue
		}
		list, err := netconf.ConfList(a.Config)
		if err != nil {
			continue
		}
		if _, ok := nets[list.Name]; !ok {
			nets[list.Name] = list
		}
		pairs[list.Name] = append(pairs[list.Name], types.GCAttachment{ContainerID: id, IfName: a.IfName})
	}
}

func (p *Pipeline) addClusterNetwork(ctx context.Context, nets map[string]*libcni.NetworkConfigList) {
	c, err := p.loadClusterNetwork(ctx)
	if err != nil {
		p.Log.Warn("GC: default network unavailable", "err", err)
		return
	}
	list, err := netconf.ConfList(c.config)
	if err != nil {
		return
	}
	if _, ok := nets[list.Name]; !ok {
		nets[list.Name] = list
	}
}

// Status (CNI 1.1) reports whether the default network is ready for ADD.
func (p *Pipeline) Status(ctx context.Context) error {
	c, err := p.loadClusterNetwork(ctx)
	if err != nil {
		return newError(codes.ClusterNetwork, "", "", err)
	}
	list, err := netconf.ConfList(c.config)
	if err != nil {
		return newError(codes.ClusterNetwork, "", c.name, err)
	}
	if err := p.CNI.GetStatusNetworkList(ctx, list); err != nil {
		return asCNIError(codes.DefaultNotReady, "", c.name, err)
	}
	return nil
}
