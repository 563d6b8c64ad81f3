package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// plan is everything decided before the first delegate runs.
type plan struct {
	pod         *source.Pod
	selections  []*selection.Element
	attachments []*Attachment
	record      *record.Record // one Planned entry per attachment
	// lists are the attachments' final configs, parsed once for attachAll.
	lists []*libcni.NetworkConfigList

	opts     PlanOptions // Plan's; an ADD's are zero
	parsed   *selection.Result
	parseErr error
	// err is the first failure, the one the ADD fails with; notes hold
	// what Plan shows of each attachment beyond it.
	err   error
	errs  []*types.Error
	notes map[*Attachment]*Planned
}

// makePlan is the plan step of an ADD, which Plan runs too: the pod, its
// default network, defaultNetworks, its selections, the stages, then each
// attachment's final config. Nothing is delegated yet.
func (p *Pipeline) makePlan(ctx context.Context, req *Request, pl *plan) error {
	var te *types.Error
	if pl.pod, te = p.lookupPod(ctx, req); te != nil {
		return pl.stop(te)
	}
	def, te := p.planDefault(ctx, req, pl)
	pl.attachments = append(pl.attachments, def)
	if te != nil {
		if err := pl.fail(def, te); err != nil {
			return err
		}
	}
	if pl.pod != nil {
		if err := p.planDefaultNetworks(ctx, req, pl); err != nil {
			return err
		}
		if err := p.planSelections(ctx, req, pl); err != nil {
			return err
		}
		if err := p.runStages(ctx, pl); err != nil {
			return err
		}
	}
	return p.buildRecord(req, pl)
}

// lookupPod reads the pod named by CNI_ARGS; without pod arguments or a
// source, plexus attaches the default network only.
func (p *Pipeline) lookupPod(ctx context.Context, req *Request) (*source.Pod, *types.Error) {
	ns, name := req.Arg(ArgPodNamespace), req.Arg(ArgPodName)
	if name == "" || p.Source == nil {
		p.Log.Info("no pod to read: attaching the default network only", "hasPodArgs", name != "", "hasSource", p.Source != nil)
		return nil, nil
	}
	ref := ns + "/" + name
	if err := cmp.Or(names.Label("K8S_POD_NAMESPACE", ns), names.Subdomain("K8S_POD_NAME", name)); err != nil {
		return nil, newError(codes.InvalidEnvironment, ref, "", err)
	}
	if pod := p.podFromRuntime(req, ns, name); pod != nil {
		return pod, nil
	}
	pod, err := p.Source.Pod(ctx, ns, name)
	if err != nil {
		return nil, newError(codes.PodLookup, ref, "", err)
	}
	uid := req.Arg(ArgPodUID)
	if fresh, ok := p.Source.(source.FreshPodGetter); ok && !isRuntimesPod(pod, uid) {
		if pod, err = fresh.FreshPod(ctx, ns, name); err != nil {
			return nil, newError(codes.PodLookup, ref, "", err)
		}
	}
	if !isRuntimesPod(pod, uid) {
		return nil, newError(codes.PodLookup, ref, "", uidMismatch(pod, uid))
	}
	return pod, nil
}

// PodAnnotationsCapability is the capability under which containerd and
// CRI-O pass the pod's annotations, as kubelet gave them, in runtimeConfig.
const PodAnnotationsCapability = "io.kubernetes.cri.pod-annotations"

// configSourceAnnotation is kubelet's: "api" for a pod from the API server,
// "file" or "http" for a static pod (k8s.io/kubernetes pkg/kubelet/types).
const configSourceAnnotation = "kubernetes.io/config.source"

// podFromRuntime is the pod as the runtime describes it, so that no pod is
// read, when that is all the ADD needs: the runtime passed the annotations
// and K8S_POD_UID (which the status update requires of the pod), no stage
// is configured (they read labels, service account, node), and the pod is
// not static (its API object is the mirror, with its own UID). nil: read it.
func (p *Pipeline) podFromRuntime(req *Request, ns, name string) *source.Pod {
	uid := req.Arg(ArgPodUID)
	if uid == "" || p.Stages.Authorizer != nil || p.Stages.Preparer != nil || p.Stages.Enricher != nil {
		return nil
	}
	raw, ok := req.RuntimeConfig[PodAnnotationsCapability]
	if !ok {
		return nil
	}
	ann, err := annotations(raw)
	if err != nil {
		p.Log.Warn("ignoring the runtime's pod annotations: reading the pod instead", "capability", PodAnnotationsCapability, "err", err)
		return nil
	}
	if src, ok := ann[configSourceAnnotation]; ok && src != "api" {
		return nil
	}
	p.Log.Debug("pod annotations from the runtime: the pod is not read", "pod", ns+"/"+name)
	return &source.Pod{Namespace: ns, Name: name, UID: uid, Annotations: ann}
}

// annotations checks the runtime's annotations: an object of strings, or
// null, containerd's for a sandbox without annotations.
func annotations(raw any) (map[string]string, error) {
	if raw == nil {
		return map[string]string{}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object of strings, got %T", raw)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("annotation %q: want a string, got %T", k, v)
		}
		out[k] = s
	}
	return out, nil
}

// MirrorAnnotation is set by kubelet on a static pod's mirror pod; its
// value is the static pod's UID (pkg/kubelet/pod/mirror_client.go), which
// is the runtime's K8S_POD_UID, never the mirror's own.
const MirrorAnnotation = "kubernetes.io/config.mirror"

// isRuntimesPod reports whether the pod read by name is the one the runtime
// means by K8S_POD_UID (the same UID, or that static pod's mirror), not one
// re-created under the same name.
func isRuntimesPod(pod *source.Pod, uid string) bool {
	if uid == "" || pod.UID == "" || pod.UID == uid {
		return true
	}
	return pod.Annotations[MirrorAnnotation] == uid
}

func uidMismatch(pod *source.Pod, uid string) error {
	if mirror, ok := pod.Annotations[MirrorAnnotation]; ok {
		return fmt.Errorf("the runtime asked for pod UID %s but the pod has UID %s and mirrors static pod %s (%s)", uid, pod.UID, mirror, MirrorAnnotation)
	}
	return fmt.Errorf("the runtime asked for pod UID %s but the pod now has UID %s (re-created under the same name)", uid, pod.UID)
}

func defaultAttachment(req *Request, c *clusterNetwork) *Attachment {
	a := standInDefault(req, OriginClusterNetwork, c.name)
	a.NAD, a.Config = c.nad, c.config
	a.CNIArgs, a.CapabilityArgs = delegateArgs(req.Args), defaultCapabilityArgs(req.RuntimeConfig, c)
	return a
}

// defaultCapabilityArgs is the runtime's runtimeConfig for the default
// network, with the pod's annotations (plexus's own capability) only when
// a default network plugin declares it, so they stay out of the record.
func defaultCapabilityArgs(rc map[string]any, c *clusterNetwork) map[string]any {
	if _, ok := rc[PodAnnotationsCapability]; !ok || c.podAnnotations {
		return rc
	}
	out := maps.Clone(rc)
	delete(out, PodAnnotationsCapability)
	return out
}

// planSelections turns the pod's annotation into secondary attachments.
func (p *Pipeline) planSelections(ctx context.Context, req *Request, pl *plan) error {
	els, te := p.parseSelection(ctx, pl)
	if te != nil {
		return pl.stop(te)
	}
	if len(els) == 0 {
		return nil
	}
	pl.selections = els
	used := make(map[string]string, len(pl.attachments)) // not for selections (s4.1.2.1.5)
	for _, a := range pl.attachments {
		used[a.IfName] = interfaceOwner(a.Default, a.Name)
	}
	ifNames, err := AssignInterfaces(used, els)
	if err != nil {
		if err := pl.fail(nil, newError(codes.InterfaceConflict, pl.pod.Ref(), "", err)); err != nil {
			return err
		}
	}
	if err := p.addSelections(ctx, req, pl, els, ifNames); err != nil {
		return err
	}
	return p.planDevices(ctx, req, pl)
}

// addSelections adds the elements' attachments on ifNames, for ADD and
// Update; each distinct NAD is read and resolved once (s4.2, s3.4.1).
func (p *Pipeline) addSelections(ctx context.Context, req *Request, pl *plan, els []*selection.Element, ifNames []string) error {
	nads := map[string]*resolvedNAD{}
	for i, el := range els {
		r, done := nads[el.Ref()]
		if !done {
			r = p.readNAD(ctx, pl, nadKind, el.Namespace, el.Name)
			nads[el.Ref()] = r
		}
		a := selectionAttachment(req, el, ifNames[i])
		pl.attachments = append(pl.attachments, a)
		if err := pl.useNAD(a, r); err != nil {
			return err
		}
	}
	return nil
}

// planDevices gives the attachments their devices; off the node it only
// checks the NADs and the pod.
func (p *Pipeline) planDevices(ctx context.Context, req *Request, pl *plan) error {
	if pl.opts.OffNode {
		return p.checkDevices(pl)
	}
	if err := p.assignDevices(ctx, pl, req.ContainerID); err != nil {
		p.event(ctx, pl.pod, source.EventWarning, "NetworkDevicesUnavailable", err.Error())
		return pl.fail(nil, asCNIError(codes.Devices, pl.pod.Ref(), "", err))
	}
	return nil
}

// parseSelection applies s4.1. An invalid annotation "shall be invalid and
// ignored": the pod gets the default network only and a warning, unless
// strictSelection makes it an error.
func (p *Pipeline) parseSelection(ctx context.Context, pl *plan) ([]*selection.Element, *types.Error) {
	pod := pl.pod
	res, err := selection.ParseWith(pod.Annotations[selection.Annotation], pod.Namespace, p.ParseOptions())
	pl.parsed, pl.parseErr = res, err
	if err != nil {
		if p.Config.StrictSelection {
			return nil, newError(codes.InvalidSelection, pod.Ref(), "", err)
		}
		msg := err.Error() + "; attaching the default network only"
		p.Log.Warn(msg, "pod", pod.Ref())
		p.event(ctx, pod, source.EventWarning, "InvalidNetworkSelection", msg)
		return nil, nil
	}
	for _, w := range res.Warnings {
		p.Log.Warn(w, "pod", pod.Ref())
		p.event(ctx, pod, source.EventWarning, "NetworkSelectionWarning", w)
	}
	return res.Elements, nil
}

// AssignInterfaces implements s4.1.2.1.5 and s4.2.1: requested names are
// used as given and must not repeat; the rest get net1, net2, ... skipping
// every name taken. used maps the names taken before to their owners and
// gains the selections'. On a conflict out holds only the requested names.
func AssignInterfaces(used map[string]string, els []*selection.Element) ([]string, error) {
	out := make([]string, len(els))
	var err error
	for i, el := range els {
		if el.Interface == "" {
			continue
		}
		if by, taken := used[el.Interface]; taken && err == nil {
			err = fmt.Errorf("selection element %d (%s) requests interface %q, already used by %s (s4.1.2.1.5)", el.Index, el.Ref(), el.Interface, by)
		}
		used[el.Interface] = fmt.Sprintf("selection element %d (%s)", el.Index, el.Ref())
		out[i] = el.Interface
	}
	if err != nil {
		return out, err
	}
	n := 1
	for i := range els {
		if out[i] != "" {
			continue
		}
		for ; ; n++ {
			if _, taken := used[fmt.Sprintf("net%d", n)]; !taken {
				break
			}
		}
		out[i] = fmt.Sprintf("net%d", n)
		used[out[i]] = "generated"
		n++
	}
	return out, nil
}

// nadKind names a selected network's NAD in readNAD's events.
const nadKind = "NetworkAttachmentDefinition"

// readNAD reads one NAD and resolves it (s3.4.1); what names it in the
// event when it cannot be read. A NAD read but not resolved is kept.
func (p *Pipeline) readNAD(ctx context.Context, pl *plan, what, namespace, name string) *resolvedNAD {
	ref := namespace + "/" + name
	n, err := p.Source.NAD(ctx, namespace, name)
	if err != nil {
		p.event(ctx, pl.pod, source.EventWarning, "NetworkNotFound", fmt.Sprintf("%s %s: %v", what, ref, err))
		return &resolvedNAD{err: newError(codes.NetworkNotFound, pl.pod.Ref(), ref, err)}
	}
	r, err := p.resolve(pl, n)
	if err != nil {
		p.event(ctx, pl.pod, source.EventWarning, "NetworkNotFound", err.Error())
		return &resolvedNAD{nad: n, err: newError(codes.NetworkNotFound, pl.pod.Ref(), ref, err)}
	}
	return &resolvedNAD{nad: n, Resolved: *r}
}

// unreadNADConfig is a plan's note on a NAD it left unresolved off the node.
const unreadNADConfig = "the NAD has no spec.config: the node's confDir decides (s3.4.1 rules 2-3)"

// resolve applies s3.4.1 to n. Off the node a NAD without spec.config is
// left unresolved, with no Config: rules 2-3 read the node's confDir.
func (p *Pipeline) resolve(pl *plan, n *source.NAD) (*nad.Resolved, error) {
	if pl.opts.OffNode && strings.TrimSpace(n.Spec.Config) == "" {
		return &nad.Resolved{}, nil
	}
	return nad.Resolve(n, p.Config.ConfDir)
}

// useNAD gives a its NAD and config as readNAD found them, and notes how
// the NAD resolved.
func (pl *plan) useNAD(a *Attachment, r *resolvedNAD) error {
	a.NAD, a.Config = r.nad, r.Config
	switch {
	case r.err != nil:
		return pl.fail(a, r.err)
	case r.Config == nil:
		pl.note(a).Unread = unreadNADConfig
	default:
		pl.note(a).ConfigSource = r.Source
	}
	return nil
}

// resolvedNAD is readNAD's answer: the NAD when read, its config when resolved.
type resolvedNAD struct {
	nad *source.NAD
	nad.Resolved
	err *types.Error
}

// delegateArgs is the runtime's CNI_ARGS with IgnoreUnknown=1 added when
// missing: delegates get K8S_POD_* (and extension args) they may not know,
// and the reference plugins refuse unknown args without it.
func delegateArgs(args [][2]string) [][2]string {
	out := make([][2]string, 0, len(args)+1)
	if !slices.ContainsFunc(args, func(kv [2]string) bool { return kv[0] == "IgnoreUnknown" }) {
		out = append(out, [2]string{"IgnoreUnknown", "1"})
	}
	return append(out, args...)
}

// selectionAttachment builds a secondary attachment; requested ips and mac
// go to args.cni and to runtimeConfig for delegates with those
// capabilities (s4.1.2.1.3.2, s4.1.2.1.4.2).
func selectionAttachment(req *Request, el *selection.Element, ifName string) *Attachment {
	a := &Attachment{
		Index:     el.Index,
		Origin:    OriginSelection,
		Selection: el,
		Name:      el.Ref(),
		IfName:    ifName,
		CNIArgs:   delegateArgs(req.Args),
	}
	for k, reason := range el.Ignored {
		setKey(&a.Ignored, k, reason) // the parse warned
	}
	a.ConfigArgs = el.DelegateArgs() // no cni-args key shadows these (selection.SameArgKey)
	if el.InfinibandGUID != "" {
		setKey(&a.CapabilityArgs, InfinibandGUIDCapability, any(el.InfinibandGUID))
	}
	if len(el.IPs) > 0 {
		setKey(&a.CapabilityArgs, "ips", any(el.IPs))
	}
	if el.MAC != "" {
		setKey(&a.CapabilityArgs, "mac", any(el.MAC))
	}
	return a
}

// runStages runs the stages that may refuse or change attachments before
// any delegate: the s7.4 decision, the extensions (s4.1.2.1), then what
// Multus's keys need once the configs are final.
func (p *Pipeline) runStages(ctx context.Context, pl *plan) error {
	for _, stage := range []func(context.Context, *plan) error{p.authorize, p.prepare, p.applyCompat} {
		if err := stage(ctx, pl); err != nil {
			return err
		}
	}
	return nil
}

// authorize makes the s7.4 decision for every attachment the pod chose
// before any delegate runs; the first denial fails the ADD.
func (p *Pipeline) authorize(ctx context.Context, pl *plan) error {
	asked := func(a *Attachment) bool { return a.Origin.ChosenByPod() && !pl.failed(a) }
	if p.Stages.Authorizer == nil || !slices.ContainsFunc(pl.attachments, asked) {
		return nil
	}
	var nsLabels map[string]string
	if u, ok := p.Stages.Authorizer.(NamespaceLabelsUser); !ok || u.NeedsNamespaceLabels() {
		nsLabels = p.namespaceLabels(ctx, pl.pod)
	}
	for _, a := range pl.attachments {
		if !asked(a) {
			continue
		}
		d, err := p.Stages.Authorizer.Authorize(ctx, &AuthorizeRequest{Pod: pl.pod, NamespaceLabels: nsLabels, Attachment: a, Selections: pl.selections})
		if err != nil {
			d.Allowed = false
			d.Reasons = append(d.Reasons, Reason{Code: "policy.error", Message: err.Error()})
		}
		if !d.Allowed && len(d.Reasons) == 0 {
			d.Reasons = []Reason{{Code: "policy.denied", Message: "the policy gave no reason"}}
		}
		pl.note(a).Decision = &d
		if d.Allowed {
			continue
		}
		msg := denialMessage(d)
		p.event(ctx, pl.pod, source.EventWarning, "NetworkAttachmentDenied", fmt.Sprintf("network %s: %s", a.Name, msg))
		if err := pl.fail(a, newError(codes.PolicyDenied, pl.pod.Ref(), a.Name, errors.New(msg))); err != nil {
			return err
		}
	}
	return nil
}

func denialMessage(d Decision) string {
	parts := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		parts[i] = fmt.Sprintf("denied by policy [%s]: %s", r.Code, r.Message)
	}
	return strings.Join(parts, "; ")
}

func (p *Pipeline) namespaceLabels(ctx context.Context, pod *source.Pod) map[string]string {
	nl, ok := p.Source.(source.NamespaceLabeler)
	if !ok {
		return nil
	}
	labels, err := nl.NamespaceLabels(ctx, pod.Namespace)
	if err != nil {
		p.Log.Warn("namespace labels unavailable for the policy input", "namespace", pod.Namespace, "err", err)
		return nil
	}
	return labels
}

// prepare hands reverse-domain keys to the extension stage; without one
// they are ignored with a warning (s4.1.2.1 leaves them to implementations).
func (p *Pipeline) prepare(ctx context.Context, pl *plan) error {
	for _, a := range pl.attachments {
		if a.Selection == nil || pl.skip(a) {
			continue
		}
		if p.Stages.Preparer == nil {
			p.warnUnowned(ctx, pl.pod, a)
			continue
		}
		warn := func(msg string) {
			pl.note(a).Warnings = append(pl.note(a).Warnings, msg)
			p.Log.Warn(msg, "pod", pl.pod.Ref(), "network", a.Name)
			p.event(ctx, pl.pod, source.EventWarning, "NetworkExtensionWarning", fmt.Sprintf("network %s: %s", a.Name, msg))
		}
		ignore := func(key, reason string) { setKey(&a.Ignored, key, reason) }
		if err := p.Stages.Preparer.Prepare(ctx, &PrepareRequest{Pod: pl.pod, Attachment: a, Warn: warn, Ignore: ignore}); err != nil {
			p.event(ctx, pl.pod, source.EventWarning, "NetworkExtensionRejected", fmt.Sprintf("network %s: %v", a.Name, err))
			if err := pl.fail(a, asCNIError(codes.Extension, pl.pod.Ref(), a.Name, err)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Pipeline) warnUnowned(ctx context.Context, pod *source.Pod, a *Attachment) {
	keys := slices.Sorted(maps.Keys(a.Selection.Extensions))
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		setKey(&a.Ignored, k, "no extension owns this key")
	}
	msg := fmt.Sprintf("selection element %d (%s): no extension owns %s; ignored", a.Index, a.Name, strings.Join(keys, ", "))
	p.Log.Warn(msg, "pod", pod.Ref())
	p.event(ctx, pod, source.EventWarning, "NetworkSelectionWarning", msg)
}

// buildRecord fixes each attachment's final config in a record of Planned entries.
func (p *Pipeline) buildRecord(req *Request, pl *plan) error {
	rec := &record.Record{ContainerID: req.ContainerID, NetNS: req.NetNS}
	if pl.pod != nil {
		rec.Pod = &record.Pod{Namespace: pl.pod.Namespace, Name: pl.pod.Name, UID: pl.pod.UID}
	}
	for _, a := range pl.attachments {
		if pl.skip(a) { // a Plan's only (PlanOptions), which attaches nothing
			continue
		}
		list, err := finalConfig(a)
		if err != nil {
			if err := pl.fail(a, newError(codes.NetworkNotFound, req.podRef(), a.Name, err)); err != nil {
				return err
			}
			continue
		}
		pl.lists = append(pl.lists, list)
		rec.Attachments = append(rec.Attachments, record.Attachment{
			Name: a.Name, Default: a.Default, IfName: a.IfName, Config: list.Bytes,
			CNIArgs: a.CNIArgs, CapabilityArgs: a.CapabilityArgs, State: record.Planned,
			Fixed:          a.Origin == OriginDefaultNetworks,
			DeviceInfoFile: a.DeviceInfoFile,
		})
	}
	pl.record = rec
	return nil
}

// finalConfig is the attachment's config with its args and plugin keys
// set, as the list libcni runs; its Bytes go into the record.
func finalConfig(a *Attachment) (*libcni.NetworkConfigList, error) {
	c, err := netconf.Parse(a.Config)
	if err != nil {
		return nil, err
	}
	if err := c.InjectArgs(a.ConfigArgs); err != nil {
		return nil, err
	}
	for k, v := range a.PluginKeys {
		c.SetPluginKey(k, v)
	}
	return c.List()
}
