package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// Status keys plexus adds to an attachment's network-status entry, in
// reverse domain notation as s5.3 requires of implementation keys.
const (
	// StatusIgnoredKey maps each selection key plexus ignored to the reason.
	StatusIgnoredKey = "io.plexus.ignored"
	// StatusDefaultRouteKey lists the gateways of the pod's default route
	// this attachment carries ("default-route"); "default" stays the
	// cluster-wide default network's (s5.3.5).
	StatusDefaultRouteKey = "io.plexus.default-route"
)

// Router changes routes in a pod's network namespace.
type Router interface {
	// ReplaceDefaultRoute makes "default via gw dev ifName" the only
	// default route of gw's family in the namespace at netns.
	ReplaceDefaultRoute(ctx context.Context, netns, ifName string, gw net.IP) error
}

// applyCompat finishes the Multus keys on final configs and counts ignored keys.
func (p *Pipeline) applyCompat(ctx context.Context, pl *plan) error {
	for _, a := range pl.attachments {
		if a.Selection == nil || pl.skip(a) {
			continue
		}
		if err := p.compatCapabilities(ctx, pl.pod, a); err != nil {
			if err := pl.fail(a, newError(codes.NetworkNotFound, pl.pod.Ref(), a.Name, err)); err != nil {
				return err
			}
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(a.Ignored)) {
			if p.OnIgnored != nil {
				p.OnIgnored(k)
			}
		}
	}
	return nil
}

// ParseOptions are how this config reads selection annotations.
func (p *Pipeline) ParseOptions() selection.ParseOptions {
	return p.Config.ParseOptions()
}

// compatCapabilities passes the element's portMappings and bandwidth as
// runtimeConfig once the config is final (after prepare). libcni hands it
// only to plugins declaring the capability, so a key none declares is
// recorded as ignored and the pod's owner told, not dropped silently.
func (p *Pipeline) compatCapabilities(ctx context.Context, pod *source.Pod, a *Attachment) error {
	c := a.Selection.Compat
	if c == nil || (c.PortMappings == nil && c.Bandwidth == nil) {
		return nil
	}
	conf, err := netconf.Parse(a.Config)
	if err != nil {
		return err
	}
	for _, cap := range []struct {
		key   string
		value any
		set   bool
	}{{selection.KeyBandwidth, c.Bandwidth, c.Bandwidth != nil}, {selection.KeyPortMappings, c.PortMappings, c.PortMappings != nil}} {
		if !cap.set {
			continue
		}
		if !conf.HasCapability(cap.key) {
			reason := fmt.Sprintf("no plugin of network %s declares the %q capability", a.Name, cap.key)
			setKey(&a.Ignored, cap.key, reason)
			msg := fmt.Sprintf("selection element %d (%s): key %q ignored: %s", a.Index, a.Name, cap.key, reason)
			p.Log.Warn(msg, "pod", pod.Ref())
			p.event(ctx, pod, source.EventWarning, "NetworkSelectionWarning", msg)
			continue
		}
		setKey(&a.CapabilityArgs, cap.key, cap.value)
	}
	return nil
}

// setKey sets (*m)[k], making the map first (whoever sets an Ignored key
// tells the pod's owner).
func setKey[V any](m *map[string]V, k string, v V) {
	if *m == nil {
		*m = map[string]V{}
	}
	(*m)[k] = v
}

// defaultRouteGateways are the attachment's "default-route" gateways.
func defaultRouteGateways(a *Attachment) []string {
	if a.Selection == nil || a.Selection.Compat == nil {
		return nil
	}
	return a.Selection.Compat.DefaultRoute
}

// setDefaultRoutes runs once every delegate has succeeded: the pod's
// default route of each requested family goes via the requesting
// attachment's gateway, in the pod's namespace (a CNI result only reports
// routes).
func (p *Pipeline) setDefaultRoutes(ctx context.Context, req *Request, pl *plan) *types.Error {
	for _, a := range pl.attachments {
		gws := defaultRouteGateways(a)
		if len(gws) == 0 {
			continue
		}
		if err := p.setDefaultRoute(ctx, req, a, gws); err != nil {
			return newError(codes.DefaultRoute, req.podRef(), attachmentLabel(a), err)
		}
	}
	return nil
}

func (p *Pipeline) setDefaultRoute(ctx context.Context, req *Request, a *Attachment, gws []string) error {
	subnets, err := sandboxSubnets(a)
	if err != nil {
		return err
	}
	if p.Routes == nil {
		return fmt.Errorf("%q is requested but this plexus cannot change routes", selection.KeyDefaultRoute)
	}
	for _, s := range gws {
		gw := net.ParseIP(s)
		if !slices.ContainsFunc(subnets, func(n *net.IPNet) bool { return n.Contains(gw) }) {
			return fmt.Errorf("%q gateway %s is in none of the attachment's subnets (%s)", selection.KeyDefaultRoute, s, listOrNone(subnets))
		}
		if err := p.Routes.ReplaceDefaultRoute(ctx, req.NetNS, a.IfName, gw); err != nil {
			return fmt.Errorf("setting the pod's default route via %s: %w", s, err)
		}
		p.Log.Info("default route replaced", "interface", a.IfName, "gateway", s)
	}
	return nil
}

// sandboxSubnets are the networks of the sandbox interface's addresses.
func sandboxSubnets(a *Attachment) ([]*net.IPNet, error) {
	if a.Result == nil {
		return nil, fmt.Errorf("the delegate returned no result, so the %q gateway cannot be placed in a subnet", selection.KeyDefaultRoute)
	}
	r, err := types100.NewResultFromResult(a.Result)
	if err != nil {
		return nil, err
	}
	sandbox := status.SandboxInterface(r)
	var out []*net.IPNet
	for _, ip := range r.IPs {
		if ip == nil || (sandbox >= 0 && (ip.Interface == nil || *ip.Interface != sandbox)) {
			continue
		}
		out = append(out, &net.IPNet{IP: ip.Address.IP.Mask(ip.Address.Mask), Mask: ip.Address.Mask})
	}
	return out, nil
}

// compatStatus adds plexus's own keys to an attachment's status entry.
func compatStatus(a *Attachment, e *status.Entry) error {
	if len(a.Ignored) > 0 {
		b, err := json.Marshal(a.Ignored)
		if err != nil {
			return err
		}
		if err := e.SetExtra(StatusIgnoredKey, b); err != nil {
			return err
		}
	}
	if gws := defaultRouteGateways(a); len(gws) > 0 {
		b, err := json.Marshal(gws)
		if err != nil {
			return err
		}
		return e.SetExtra(StatusDefaultRouteKey, b)
	}
	return nil
}
