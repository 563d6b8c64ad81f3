package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// readinessPoll is how often ADD looks for readinessindicatorfile.
const readinessPoll = 100 * time.Millisecond

// awaitReadiness waits, bounded by readinessTimeout, for the admin's
// readinessindicatorfile: the default network's sign that it is ready.
// Nothing has been delegated yet, so failing here leaves nothing behind.
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
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("readinessindicatorfile %s: %w", path, err)
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

// planDefault is the pod's default network: the one its
// DefaultNetworkAnnotation names (Multus compatibility), else the
// cluster-wide one (s6).
func (p *Pipeline) planDefault(ctx context.Context, req *Request, pod *source.Pod) (*Attachment, error) {
	if pod != nil && p.Config.MultusCompat() {
		if v, ok := pod.Annotations[selection.DefaultNetworkAnnotation]; ok {
			return p.podDefault(ctx, req, pod, v)
		}
	}
	cluster, err := p.loadClusterNetwork(ctx)
	if err != nil {
		return nil, newError(codes.ClusterNetwork, req.podRef(), "", err)
	}
	return defaultAttachment(req, cluster), nil
}

// podDefault resolves the pod's own default network. An invalid or
// unresolvable annotation fails the ADD whatever strictSelection says: the
// default network gives the pod its cluster address, and a pod started on
// another than the one it asked for runs on the wrong network.
func (p *Pipeline) podDefault(ctx context.Context, req *Request, pod *source.Pod, value string) (*Attachment, error) {
	ref, err := selection.ParseDefaultNetwork(value, p.Config.SystemNamespace)
	if err != nil {
		p.event(ctx, pod, source.EventWarning, "InvalidDefaultNetwork", err.Error())
		return nil, newError(codes.InvalidSelection, pod.Ref(), "", err)
	}
	n, err := p.Source.NAD(ctx, ref.Namespace, ref.Name)
	if err != nil {
		p.event(ctx, pod, source.EventWarning, "NetworkNotFound", defaultNotFound(ref.Ref(), err))
		return nil, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	r, err := nad.Resolve(n, p.Config.ConfDir)
	if err != nil {
		p.event(ctx, pod, source.EventWarning, "NetworkNotFound", err.Error())
		return nil, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	raw, err := p.withAuxiliaryChain(r.Config, p.Config.ConfDir)
	if err != nil {
		return nil, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	c, err := clusterFromConfig(raw, "default network "+ref.Ref(), n)
	if err != nil {
		return nil, newError(codes.NetworkNotFound, pod.Ref(), ref.Ref(), err)
	}
	a := defaultAttachment(req, c)
	a.Origin = OriginPodDefault
	return a, nil
}

// planDefaultNetworks adds the defaultNetworks every pod outside
// systemNamespaces gets, after its default network and before its
// selections, on net1, net2, ...
func (p *Pipeline) planDefaultNetworks(ctx context.Context, req *Request, pl *plan) error {
	if len(p.Config.DefaultNetworks) == 0 || p.Config.IsSystemNamespace(pl.pod.Namespace) {
		return nil
	}
	for i, ref := range p.Config.DefaultNetworks {
		ns, name, err := names.NADRef("defaultNetworks", ref)
		if err != nil { // config.Parse checked it; a Config built in code may not be
			return newError(codes.NetworkNotFound, pl.pod.Ref(), ref, err)
		}
		if ns == "" {
			ns = p.Config.SystemNamespace
		}
		full := ns + "/" + name
		n, err := p.Source.NAD(ctx, ns, name)
		if err != nil {
			p.event(ctx, pl.pod, source.EventWarning, "NetworkNotFound", fmt.Sprintf("defaultNetworks %s: %v", full, err))
			return newError(codes.NetworkNotFound, pl.pod.Ref(), full, err)
		}
		r, err := nad.Resolve(n, p.Config.ConfDir)
		if err != nil {
			p.event(ctx, pl.pod, source.EventWarning, "NetworkNotFound", err.Error())
			return newError(codes.NetworkNotFound, pl.pod.Ref(), full, err)
		}
		pl.attachments = append(pl.attachments, &Attachment{
			Index:   -1,
			Origin:  OriginDefaultNetworks,
			NAD:     n,
			Name:    full,
			IfName:  fmt.Sprintf("net%d", i+1),
			Config:  r.Config,
			CNIArgs: delegateArgs(req.Args),
		})
	}
	return nil
}

// usedInterfaces are the names the attachments planned so far hold, which
// the selections must not take (s4.1.2.1.5).
func (p *Pipeline) usedInterfaces(pl *plan) map[string]string {
	used := make(map[string]string, len(pl.attachments))
	for _, a := range pl.attachments {
		switch {
		case a.Default:
			used[a.IfName] = "the default network"
		default:
			used[a.IfName] = "defaultNetworks " + a.Name
		}
	}
	return used
}

// defaultNotFound is the NetworkNotFound event's message for the pod's
// default network: a not-found error names the NAD already, any other
// (the API failed) is told which one it was about.
func defaultNotFound(ref string, err error) string {
	if errors.Is(err, source.ErrNotFound) {
		return fmt.Sprintf("default network (%s): %v", selection.DefaultNetworkAnnotation, err)
	}
	return fmt.Sprintf("default network %s (%s): %v", ref, selection.DefaultNetworkAnnotation, err)
}
