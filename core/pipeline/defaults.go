package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// readinessPoll is how often ADD looks for readinessindicatorfile.
const readinessPoll = 100 * time.Millisecond

// awaitReadiness waits, bounded by readinessTimeout, for the
// readinessindicatorfile that says the default network is ready.
func (p *Pipeline) awaitReadiness(ctx context.Context) error {
	path := p.Config.ReadinessIndicatorFile
	if path == "" {
		return nil
	}
	wait := p.Config.ReadinessWait()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(readinessPoll)
	defer tick.Stop()
	for {
		ok, err := p.exists(path)
		if err != nil {
			return fmt.Errorf("readinessindicatorfile %s: %w", path, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the default network is not ready: readinessindicatorfile %s does not exist (%w)", path, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("the default network is not ready: readinessindicatorfile %s did not appear within %s (readinessTimeout)", path, wait)
		case <-tick.C:
		}
	}
}

// exists is Exists, or a stat in this process's filesystem.
func (p *Pipeline) exists(path string) (bool, error) {
	if p.Exists != nil {
		return p.Exists(path)
	}
	_, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// planDefault is the pod's default network: its DefaultNetworkAnnotation's,
// else the cluster-wide one (s6); on failure a stand-in.
func (p *Pipeline) planDefault(ctx context.Context, req *Request, pl *plan) (*Attachment, *types.Error) {
	if pl.pod != nil && p.Config.MultusCompat() {
		if v, ok := pl.pod.Annotations[selection.DefaultNetworkAnnotation]; ok {
			return p.podDefault(ctx, req, pl, v)
		}
	}
	if pl.opts.OffNode && p.clusterNetworkOnNode() {
		a := standInDefault(req, OriginClusterNetwork, p.Config.ClusterNetwork)
		pl.note(a).Unread = "the cluster-wide default network is read from the node's files (s6)"
		return a, nil
	}
	cluster, err := p.loadClusterNetwork(ctx)
	if err != nil {
		return standInDefault(req, OriginClusterNetwork, p.Config.ClusterNetwork), newError(codes.ClusterNetwork, req.podRef(), "", err)
	}
	return defaultAttachment(req, cluster), nil
}

// clusterNetworkOnNode: the cluster-wide default network is a file or
// directory on the node (unnamed: the one plexusd found there).
func (p *Pipeline) clusterNetworkOnNode() bool {
	ref := p.Config.ClusterNetwork
	return isPath(ref) || (ref == "" && len(p.Config.Delegates) == 0)
}

// standInDefault holds the default network's place when it could not be planned.
func standInDefault(req *Request, o Origin, name string) *Attachment {
	return &Attachment{Index: -1, Default: true, Origin: o, Name: name, IfName: req.IfName}
}

// podDefault resolves the pod's own default network. An invalid or
// unresolvable annotation fails the ADD whatever strictSelection says: a
// pod started on another default network has the wrong cluster address.
func (p *Pipeline) podDefault(ctx context.Context, req *Request, pl *plan, value string) (*Attachment, *types.Error) {
	pod := pl.pod
	a := standInDefault(req, OriginPodDefault, "")
	ref, err := selection.ParseDefaultNetwork(value, p.Config.SystemNamespace)
	if err != nil {
		p.event(ctx, pod, source.EventWarning, "InvalidDefaultNetwork", err.Error())
		return a, newError(codes.InvalidSelection, pod.Ref(), "", err)
	}
	a.Name = ref.Ref()
	if a.NAD, err = p.Source.NAD(ctx, ref.Namespace, ref.Name); err != nil {
		p.event(ctx, pod, source.EventWarning, "NetworkNotFound", defaultNotFound(ref.Ref(), err))
		return a, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	r, err := p.resolve(pl, a.NAD)
	if err != nil {
		p.event(ctx, pod, source.EventWarning, "NetworkNotFound", err.Error())
		return a, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	if r.Config == nil {
		pl.note(a).Unread = unreadNADConfig
		return a, nil
	}
	c, err := p.clusterFromConfig(r.Config, p.Config.ConfDir, "default network "+ref.Ref(), a.NAD)
	if err != nil {
		return a, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	d := defaultAttachment(req, c)
	d.Origin = OriginPodDefault
	pl.note(d).ConfigSource = r.Source
	return d, nil
}

// planDefaultNetworks adds the defaultNetworks every pod outside
// systemNamespaces gets, on net1, net2, ...
func (p *Pipeline) planDefaultNetworks(ctx context.Context, req *Request, pl *plan) error {
	if len(p.Config.DefaultNetworks) == 0 || p.Config.IsSystemNamespace(pl.pod.Namespace) {
		return nil
	}
	for i, ref := range p.Config.DefaultNetworks {
		a := &Attachment{Index: -1, Origin: OriginDefaultNetworks, Name: ref, IfName: fmt.Sprintf("net%d", i+1), CNIArgs: delegateArgs(req.Args)}
		pl.attachments = append(pl.attachments, a)
		if err := p.planDefaultNetwork(ctx, pl, a, ref); err != nil {
			return err
		}
	}
	return nil
}

// planDefaultNetwork reads and resolves one of defaultNetworks for a.
func (p *Pipeline) planDefaultNetwork(ctx context.Context, pl *plan, a *Attachment, ref string) error {
	ns, name, err := names.NADRef("defaultNetworks", ref)
	if err != nil { // config.Parse checked it; a Config built in code may not be
		return pl.fail(a, newError(codes.NetworkNotFound, pl.pod.Ref(), ref, err))
	}
	if ns == "" {
		ns = p.Config.SystemNamespace
	}
	a.Name = ns + "/" + name
	return pl.useNAD(a, p.readNAD(ctx, pl, "defaultNetworks", ns, name))
}

// interfaceOwner names, for AssignInterfaces, the network the config gave
// an interface.
func interfaceOwner(isDefault bool, name string) string {
	if isDefault {
		return "the default network"
	}
	return "defaultNetworks " + name
}

// defaultNotFound is the NetworkNotFound event's message for the pod's
// default network; a not-found error names the NAD already.
func defaultNotFound(ref string, err error) string {
	if errors.Is(err, source.ErrNotFound) {
		return fmt.Sprintf("default network (%s): %v", selection.DefaultNetworkAnnotation, err)
	}
	return fmt.Sprintf("default network %s (%s): %v", ref, selection.DefaultNetworkAnnotation, err)
}
