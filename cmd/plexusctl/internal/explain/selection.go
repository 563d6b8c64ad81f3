package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
)

// InvalidConsequence and StrictConsequence are what plexus does with an
// invalid annotation (s4.1) without and with strictSelection.
const (
	InvalidConsequence = "plexus attaches the default network only (s4.1); with strictSelection the ADD fails instead"
	StrictConsequence  = "the ADD fails (strictSelection)"
)

// plan makes the node's plan for the pod (pipeline.Plan, off the node,
// past every failure) and reports it.
func (b *builder) plan(ctx context.Context, c *config.Config) {
	p := &pipeline.Pipeline{Config: c, Source: b.src, Log: slog.New(slog.DiscardHandler)}
	// The stages explain loaded, as the node's pipeline has them; a nil
	// one must stay a nil interface.
	if b.engine != nil {
		p.Stages.Authorizer = b.engine
	}
	if b.ext != nil {
		p.Stages.Preparer = b.ext
	}
	req := &pipeline.Request{
		ContainerID: "plexusctl-explain", IfName: "eth0", // as every runtime gives it
		Args: [][2]string{{pipeline.ArgPodNamespace, b.pod.Namespace}, {pipeline.ArgPodName, b.pod.Name}},
	}
	v, err := p.Plan(ctx, req, pipeline.PlanOptions{All: true, OffNode: true})
	b.selection(v, c.StrictSelection)
	b.defaultNetwork(v)
	for _, a := range v.DefaultNetworks {
		b.r.DefaultNetworks = append(b.r.DefaultNetworks, b.attachment(a))
	}
	for _, a := range v.Selections {
		b.r.Attachments = append(b.r.Attachments, b.attachment(a))
	}
	b.verdict(v, err)
}

// selection reports the networks annotation as the plan parsed it (s4.1).
func (b *builder) selection(v *pipeline.Plan, strict bool) {
	val, ok := b.pod.Annotations[selection.Annotation]
	a := &b.r.Annotation
	a.Present, a.Value = ok, val
	if err := v.SelectionErr; err != nil {
		a.Error, a.Consequence = err.Error(), InvalidConsequence
		var se *selection.Error
		if errors.As(err, &se) && se.Index >= 0 {
			a.ErrorElement = &se.Index
		}
		if strict {
			a.Consequence = StrictConsequence // the plan's error says so
		} else {
			b.problem("%v; %s", err, InvalidConsequence)
		}
		return
	}
	if v.Selection == nil {
		return
	}
	a.Valid, a.Format, a.Warnings = true, string(v.Selection.Format), v.Selection.Warnings
	for _, w := range v.Selection.Warnings {
		b.warn("%s", w)
	}
}

// defaultNetwork reports v1.multus-cni.io/default-network (compat only).
// A bad value, a missing NAD or a denial fails the ADD: the pod must not
// start on another network.
func (b *builder) defaultNetwork(v *pipeline.Plan) {
	val, ok := b.pod.Annotations[selection.DefaultNetworkAnnotation]
	if !ok {
		return
	}
	d := &DefaultNetwork{Value: val}
	b.r.DefaultNetwork = d
	a := v.Default
	if a == nil || a.Origin != pipeline.OriginPodDefault {
		d.Ignored = "compat is off: plexus does not read this annotation (not in the spec); the pod gets the cluster-wide default network (s6)"
		b.warn("%s: %s", selection.DefaultNetworkAnnotation, d.Ignored)
		return
	}
	ns, name := nadOf(a)
	if ns == "" {
		d.Error = cause(a.Err, b.pod.Ref(), "")
		return
	}
	d.Network = ns + "/" + name
	n := b.nadReport(ns, name, a)
	d.NAD, d.Policy = &n, b.decision(a)
}

// nadOf is the NAD an attachment names: the one read, else the
// "namespace/name" it was planned as.
func nadOf(a *pipeline.Planned) (namespace, name string) {
	if a.NAD != nil {
		return a.NAD.Namespace, a.NAD.Name
	}
	if el := a.Selection; el != nil {
		return el.Namespace, el.Name
	}
	ns, name, _ := strings.Cut(a.Name, "/")
	if name == "" {
		return "", ""
	}
	return ns, name
}

// attachment reports a selection element or defaultNetworks network.
func (b *builder) attachment(a *pipeline.Planned) Attachment {
	ns, name := nadOf(a)
	out := Attachment{Index: a.Index, Network: ns + "/" + name, Interface: a.IfName, Ignored: a.Ignored, NAD: b.nadReport(ns, name, a), Policy: b.decision(a)}
	if el := a.Selection; el != nil {
		out.InterfaceRequested = el.Interface != ""
		out.IPs, out.MAC, out.DeviceID, out.InfinibandGUID, out.Compat = el.IPs, el.MAC, el.DeviceID, el.InfinibandGUID, el.Compat
		for _, k := range slices.Sorted(maps.Keys(el.Extensions)) {
			out.Keys = append(out.Keys, b.ownKey(&out, k, a))
		}
	}
	for _, w := range a.Warnings {
		b.warn("%s: %s", where(a), w)
	}
	return out
}

// where names an attachment in problems and warnings.
func where(a *pipeline.Planned) string {
	switch {
	case a.Selection != nil:
		return fmt.Sprintf("selection element %d (%s)", a.Index, a.Selection.Ref())
	case a.Default:
		ns, name := nadOf(a)
		if ns == "" {
			return "default network"
		}
		return "default network " + ns + "/" + name
	}
	return "defaultNetworks " + a.Name
}

// verdict reports what the ADD does: the error it fails with and a
// problem for every failure the plan found, or the interfaces it gives.
func (b *builder) verdict(v *pipeline.Plan, err error) {
	add := &b.r.Add
	var te *types.Error
	if !errors.As(err, &te) {
		add.Interfaces = append(add.Interfaces, v.Default.IfName)
		for _, a := range slices.Concat(b.r.DefaultNetworks, b.r.Attachments) {
			add.Interfaces = append(add.Interfaces, a.Interface)
		}
		return
	}
	add.Fails, add.Code, add.Message = true, te.Code, te.Msg
	if f := v.Failed; f != nil {
		add.Network = f.Name
		if f.Selection != nil {
			add.Element = &f.Index
		}
	} else if b.r.Annotation.ErrorElement != nil && te.Code == codes.InvalidSelection {
		add.Element = b.r.Annotation.ErrorElement
	}
	for _, e := range v.Errs {
		b.failure(v, e)
	}
}

// failure is one failure of the plan as a problem, naming where.
func (b *builder) failure(v *pipeline.Plan, e *types.Error) {
	for _, a := range append(append([]*pipeline.Planned{v.Default}, v.DefaultNetworks...), v.Selections...) {
		if a == nil || a.Err != e {
			continue
		}
		ns, name := nadOf(a)
		detail := cause(e, b.pod.Ref(), a.Name)
		if n := b.src.seen[ns+"/"+name]; n != nil && n.err != nil {
			detail = n.why
		} else if e.Code == codes.NetworkNotFound && n != nil {
			detail = "invalid config (s3.4.1): " + detail
		}
		if w := where(a); !strings.HasPrefix(detail, w) {
			detail = w + ": " + detail
		}
		b.problem("%s: the ADD fails (code %d)", detail, e.Code)
		return
	}
	b.problem("%s: the ADD fails (code %d)", cause(e, b.pod.Ref(), ""), e.Code)
}

// nodeConfig is the config the plan is made with: the --config file, the
// node's PlexusNode's settings, or plexus's defaults with a warning.
func (b *builder) nodeConfig(ctx context.Context) (*config.Config, error) {
	if path := b.opts.ConfigFile; path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading --config: %w", err)
		}
		c, err := config.ParseBase(raw)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", path, err)
		}
		b.r.Settings = Settings{From: "config " + path, NodeSettings: *nodestate.Settings(c, "")}
		// An auxiliary chain is a directory on the node, which Plan does
		// not leave to the node as it does the rest.
		c.AuxiliaryCNIChainName = ""
		return c, nil
	}
	node, why := b.planNode(ctx)
	if node != nil {
		c, err := configOf(node.Status.Settings)
		if err != nil {
			return nil, fmt.Errorf("PlexusNode %s: %w", node.Name, err)
		}
		b.r.Settings = Settings{From: "PlexusNode " + node.Name, NodeSettings: *node.Status.Settings}
		return c, nil
	}
	c, err := configOf(&plexusapi.NodeSettings{})
	if err != nil {
		return nil, err
	}
	b.r.Settings = Settings{From: "defaults", NodeSettings: *nodestate.Settings(c, "")}
	b.warn("%s: the plan uses plexus's defaults: %s", why, describeSettings(&b.r.Settings.NodeSettings))
	return c, nil
}

// planNode reads the PlexusNode of --node, else of the pod's node, with
// settings; or says why there is none.
func (b *builder) planNode(ctx context.Context) (*plexusapi.PlexusNode, string) {
	name := cmp.Or(b.opts.Node, b.pod.NodeName)
	switch {
	case name == "":
		return nil, "no node (--node, or the pod's spec.nodeName) and no --config"
	case b.opts.Cluster == nil:
		return nil, fmt.Sprintf("no kubeconfig to read PlexusNode %s, and no --config", name)
	}
	pn, err := b.opts.Cluster.plexusNode(ctx, name)
	switch {
	case err != nil:
		return nil, err.Error()
	case pn == nil:
		return nil, fmt.Sprintf("no PlexusNode %s", name)
	case pn.Status.Settings == nil:
		return nil, fmt.Sprintf("PlexusNode %s reports no settings (an older plexus)", name)
	}
	return pn, ""
}

// configOf is a config with the node's settings: their names are the
// config's keys, and what they leave out takes the defaults.
func configOf(s *plexusapi.NodeSettings) (*config.Config, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c, err := config.ParseBase(raw)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return c, nil
}

func describeSettings(s *plexusapi.NodeSettings) string {
	none := func(l []string) string { return cmp.Or(strings.Join(l, ", "), "none") }
	return fmt.Sprintf("compat %s, strictSelection %v, systemNamespace %s, defaultNetworks %s, systemNamespaces %s",
		s.Compat, s.StrictSelection, s.SystemNamespace, none(s.DefaultNetworks), none(s.SystemNamespaces))
}
