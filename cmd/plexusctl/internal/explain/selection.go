package explain

import (
	"context"
	"errors"
	"sort"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
)

// InvalidConsequence is what plexus does with an invalid annotation
// (s4.1: "invalid and ignored") unless strictSelection is set.
const InvalidConsequence = "plexus attaches the default network only (s4.1); with strictSelection the ADD fails instead"

// selection parses the networks annotation (s4.1) into the report and
// keeps the elements for the next steps.
func (b *builder) selection() {
	v, ok := b.pod.Annotations[selection.Annotation]
	a := &b.r.Annotation
	a.Present, a.Value = ok, v
	res, err := selection.ParseWith(v, b.pod.Namespace, config.DefaultParseOptions())
	if err != nil {
		b.invalidSelection(err)
		return
	}
	a.Valid, a.Format, a.Warnings = true, string(res.Format), res.Warnings
	for _, w := range res.Warnings {
		b.warn("%s", w)
	}
	// The same assignment as the pipeline's; defaultNetworks of the node's
	// config, which take net1.. first, are not known here.
	ifNames, err := pipeline.AssignInterfaces(map[string]string{defaultRuntimeInterface: "the default network"}, res.Elements)
	if err != nil {
		b.problem("%v: the ADD fails", err)
		ifNames = requestedInterfaces(res.Elements)
	}
	for i, el := range res.Elements {
		b.r.Attachments = append(b.r.Attachments, attachmentOf(el, ifNames[i]))
	}
	b.elements = res.Elements
}

func (b *builder) invalidSelection(err error) {
	a := &b.r.Annotation
	a.Error, a.Consequence = err.Error(), InvalidConsequence
	var se *selection.Error
	if errors.As(err, &se) && se.Index >= 0 {
		i := se.Index
		a.ErrorElement = &i
	}
	b.problem("%v; %s", err, InvalidConsequence)
}

func attachmentOf(el *selection.Element, ifName string) Attachment {
	a := Attachment{
		Index: el.Index, Network: el.Ref(), Interface: ifName, InterfaceRequested: el.Interface != "",
		IPs: el.IPs, MAC: el.MAC, DeviceID: el.DeviceID, InfinibandGUID: el.InfinibandGUID,
		Compat: el.Compat, Ignored: el.Ignored,
		NAD: NAD{Namespace: el.Namespace, Name: el.Name},
	}
	keys := make([]string, 0, len(el.Extensions))
	for k := range el.Extensions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a.Keys = append(a.Keys, Key{Key: k})
	}
	return a
}

// defaultRuntimeInterface is the default network's interface: the
// runtime's CNI_IFNAME, which every runtime sets to eth0.
const defaultRuntimeInterface = "eth0"

// requestedInterfaces are the names the elements ask for, for reporting
// when AssignInterfaces refused them.
func requestedInterfaces(els []*selection.Element) []string {
	out := make([]string, len(els))
	for i, el := range els {
		out[i] = el.Interface
	}
	return out
}

// defaultNetwork reads v1.multus-cni.io/default-network, which plexus
// honors with Multus compatibility on. A bad value, a missing NAD or a
// denial fails the ADD: the pod must not start on another network.
func (b *builder) defaultNetwork(ctx context.Context) {
	v, ok := b.pod.Annotations[selection.DefaultNetworkAnnotation]
	if !ok {
		return
	}
	d := &DefaultNetwork{Value: v}
	b.r.DefaultNetwork = d
	ref, err := selection.ParseDefaultNetwork(v, config.DefaultSystemNamespace)
	if err != nil {
		d.Error = err.Error()
		b.problem("%v: the ADD fails", err)
		return
	}
	d.Network = ref.Ref()
	n := b.checkNAD(ctx, ref.Namespace, ref.Name, "default network "+ref.Ref())
	d.NAD = &n.report
	b.defaultNAD = n
}
