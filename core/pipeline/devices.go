package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/devinfo"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// ResourceNameAnnotation on a NAD names the device plugin resource whose
// devices its attachments use (device-info spec s4.1).
const ResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"

// ResourceClaimAnnotation on a NAD names a claim of the pod (DRA,
// resource.k8s.io/v1) as spec.resourceClaims does: "<claim>" or
// "<claim>/<request>". Each attachment of the NAD gets one of its devices.
const ResourceClaimAnnotation = "plexus.io/resource-claim"

// Capability names under which delegates take these keys in runtimeConfig.
const (
	DeviceIDCapability       = "deviceID"
	InfinibandGUIDCapability = "infinibandGUID"
)

// PodDevices are the device IDs kubelet allocated to a pod's containers,
// per resource name; an alias, so a lister need not import the pipeline.
type PodDevices = map[string][]string

// DeviceLister tells which devices kubelet allocated to a pod; asked at
// most once per ADD, only when a NAD names a resource.
type DeviceLister interface {
	PodDevices(ctx context.Context, namespace, name string) (PodDevices, error)
}

// assignDevices gives every attachment of a NAD naming a resource or a
// claim of the pod its own device, in a stable order (device IDs sorted):
// requested deviceIDs first, the rest in selection order.
func (p *Pipeline) assignDevices(ctx context.Context, pl *plan, containerID string) error {
	resources, claims, err := groupDeviceNADs(pl)
	if err != nil {
		return err
	}
	for _, ref := range claims.order {
		if err := p.assignClaim(ctx, pl, ref, claims.by[ref], containerID); err != nil {
			return err
		}
	}
	if len(resources.order) == 0 {
		return nil
	}
	if p.Devices == nil {
		return newError(codes.Devices, pl.pod.Ref(), "", fmt.Errorf("NADs name resource %s, but plexus has no pod-resources client to ask kubelet for the pod's devices", resources.order[0]))
	}
	devs, err := p.Devices.PodDevices(ctx, pl.pod.Namespace, pl.pod.Name)
	if err != nil {
		return newError(codes.Devices, pl.pod.Ref(), "", fmt.Errorf("asking kubelet which devices the pod was allocated: %w", err))
	}
	for _, res := range resources.order {
		atts := resources.by[res]
		ids, err := p.assign(pl, "resource "+res, devs[res], atts)
		if err != nil {
			return err
		}
		for i, a := range atts {
			if err := p.setDeviceInfo(a, res, ids[i], containerID); err != nil {
				return newError(codes.Devices, pl.pod.Ref(), a.Name, err)
			}
		}
	}
	return nil
}

// deviceGroup is attachments by resource name or claim, in first-seen order.
type deviceGroup struct {
	order []string
	by    map[string][]*Attachment
}

func (g *deviceGroup) add(key string, a *Attachment) {
	if g.by == nil {
		g.by = map[string][]*Attachment{}
	}
	if _, seen := g.by[key]; !seen {
		g.order = append(g.order, key)
	}
	g.by[key] = append(g.by[key], a)
}

// groupDeviceNADs groups secondary attachments by their NAD's resource or claim.
func groupDeviceNADs(pl *plan) (resources, claims deviceGroup, err error) {
	for _, a := range pl.attachments[1:] {
		if a.NAD == nil || pl.failed(a) {
			continue
		}
		ref, isClaim, err := deviceNAD(a)
		switch {
		case err != nil:
			return resources, claims, newError(codes.Devices, pl.pod.Ref(), a.Name, err)
		case isClaim:
			claims.add(ref, a)
		case a.ResourceName != "":
			resources.add(a.ResourceName, a)
		}
	}
	return resources, claims, nil
}

// deviceNAD reads the devices a's NAD asks for: a claim of the pod, or a
// device plugin resource (validated, into a.ResourceName), never both;
// with neither a requested deviceID is handed on.
func deviceNAD(a *Attachment) (claim string, isClaim bool, err error) {
	res := a.NAD.Annotations[ResourceNameAnnotation]
	claim, isClaim = a.NAD.Annotations[ResourceClaimAnnotation]
	switch {
	case isClaim && res != "":
		return "", false, fmt.Errorf("the NAD names both a resource (%s) and a resource claim (%s): choose one", ResourceNameAnnotation, ResourceClaimAnnotation)
	case isClaim:
	case res != "":
		if err := names.ResourceName("the NAD's "+ResourceNameAnnotation+" annotation", res); err != nil {
			return "", false, err
		}
		a.ResourceName = res
	case requestedDevice(a) != "":
		setDevice(a, requestedDevice(a))
	}
	return claim, isClaim, nil
}

// checkDevices is assignDevices off the node: it checks the NADs' device
// annotations, and claims against the pod's spec.resourceClaims if known.
func (p *Pipeline) checkDevices(pl *plan) error {
	for _, a := range pl.attachments[1:] {
		if a.NAD == nil || pl.failed(a) {
			continue
		}
		if err := checkDeviceNAD(pl.pod, a); err != nil {
			if err := pl.fail(a, newError(codes.Devices, pl.pod.Ref(), a.Name, err)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDeviceNAD(pod *source.Pod, a *Attachment) error {
	ref, isClaim, err := deviceNAD(a)
	if err != nil || !isClaim {
		return err
	}
	podClaim, _, err := ParseClaimRef(ref)
	if err == nil && pod.ResourceClaims != nil {
		_, err = claimOf(pod, podClaim)
	}
	return err
}

// assign hands out the devices of one resource or claim (what) to atts.
func (p *Pipeline) assign(pl *plan, what string, allocated []string, atts []*Attachment) ([]string, error) {
	ids := slices.Clone(allocated)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		if err := names.DeviceID("the device ID of "+what, id); err != nil {
			return nil, newError(codes.Devices, pl.pod.Ref(), atts[0].Name, err)
		}
	}
	if len(ids) == 0 {
		return nil, newError(codes.Devices, pl.pod.Ref(), atts[0].Name, fmt.Errorf("%s: no device of it is allocated to the pod, which has %d attachment(s) needing one%s", what, len(atts), noDeviceHint(what)))
	}
	used := map[string]*Attachment{}
	for _, a := range atts {
		want := requestedDevice(a)
		if want == "" {
			continue
		}
		if !slices.Contains(ids, want) {
			return nil, newError(codes.Devices, pl.pod.Ref(), a.Name, fmt.Errorf("selection element %d requests device %q of %s, which is not one of the pod's (%s)", a.Index, want, what, strings.Join(ids, ", ")))
		}
		if by, taken := used[want]; taken {
			return nil, newError(codes.Devices, pl.pod.Ref(), a.Name, fmt.Errorf("selection element %d requests device %q of %s, already requested by element %d", a.Index, want, what, by.Index))
		}
		used[want] = a
	}
	// Every requested device is in used, once: the rest need a free one.
	free := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return used[id] != nil })
	if len(atts)-len(used) > len(free) {
		return nil, newError(codes.Devices, pl.pod.Ref(), atts[0].Name, fmt.Errorf("%s: the pod was allocated %d device(s) (%s) but %d attachment(s) need one", what, len(ids), strings.Join(ids, ", "), len(atts)))
	}
	out := make([]string, len(atts))
	for i, a := range atts {
		out[i] = requestedDevice(a)
		if out[i] == "" {
			out[i], free = free[0], free[1:]
		}
	}
	return out, nil
}

func noDeviceHint(what string) string {
	if strings.HasPrefix(what, "resource ") {
		return "; request it in a container's resources.limits"
	}
	return ""
}

// setDevice hands the device to the delegate's config and runtimeConfig.
func setDevice(a *Attachment, id string) {
	a.DeviceID = id
	setKey(&a.PluginKeys, selection.DeviceIDKey, any(id))
	setKey(&a.CapabilityArgs, DeviceIDCapability, any(id))
}

// setDeviceInfo hands device id to the attachment and fixes its
// device-info files: the device plugin's of resource res (s4.1; none for a
// claim's, res ""), copied at attach time to the CNI file (s4.2.1), whose
// path goes to delegates declaring the capability (s5.1.1).
func (p *Pipeline) setDeviceInfo(a *Attachment, res, id, containerID string) error {
	files := devinfo.Files{Dir: p.Config.DeviceInfoDir}
	if res != "" {
		dp, err := files.DevicePluginFile(res, id)
		if err != nil {
			return err
		}
		a.DevicePluginFile = dp
	}
	cni, err := files.CNIFile(containerID, a.IfName)
	if err != nil {
		return err
	}
	a.DeviceInfoFile = cni
	setKey(&a.CapabilityArgs, devinfo.Capability, any(cni))
	setDevice(a, id)
	return nil
}

// prepareDeviceInfo writes a's CNI device-info file before its delegate (s4.2.1).
func prepareDeviceInfo(a *Attachment) error {
	if a.DeviceInfoFile == "" {
		return nil
	}
	if a.DevicePluginFile == "" {
		// A claim's device: no device plugin file; the delegate may write one.
		return devinfo.Remove(a.DeviceInfoFile)
	}
	if _, err := devinfo.Prepare(a.DevicePluginFile, a.DeviceInfoFile); err != nil {
		return fmt.Errorf("device %s of %s: %w", a.DeviceID, a.ResourceName, err)
	}
	return nil
}

// addDeviceInfo puts the CNI device-info file in the status entry (s6.1.1).
func (p *Pipeline) addDeviceInfo(ctx context.Context, pl *plan, a *Attachment, e *status.Entry) {
	if a.DeviceInfoFile == "" {
		return
	}
	info, err := devinfo.Read(a.DeviceInfoFile)
	if err != nil {
		msg := fmt.Sprintf("network %s: device-info left out of %s: %v", a.Name, status.Annotation, err)
		p.Log.Warn(msg)
		p.event(ctx, pl.pod, source.EventWarning, "NetworkDeviceInfoInvalid", msg)
		return
	}
	e.DeviceInfo = info
}

// requestedDevice is the deviceID a's selection element asks for, or "".
func requestedDevice(a *Attachment) string {
	if a.Selection == nil {
		return ""
	}
	return a.Selection.DeviceID
}

// ParseClaimRef splits and checks a ResourceClaimAnnotation value.
func ParseClaimRef(ref string) (podClaim, request string, err error) {
	podClaim, request, _ = strings.Cut(ref, "/")
	if err := names.Label("the NAD's "+ResourceClaimAnnotation+" claim", podClaim); err != nil {
		return "", "", err
	}
	if request != "" {
		if err := names.Label("the NAD's "+ResourceClaimAnnotation+" request", request); err != nil {
			return "", "", err
		}
	}
	return podClaim, request, nil
}

// assignClaim resolves a claim of the pod to the devices allocated for it
// (the ResourceClaim's status) and hands them to its attachments.
func (p *Pipeline) assignClaim(ctx context.Context, pl *plan, ref string, atts []*Attachment, containerID string) error {
	fail := func(err error) error { return newError(codes.Devices, pl.pod.Ref(), atts[0].Name, err) }
	podClaim, request, err := ParseClaimRef(ref)
	if err != nil {
		return fail(err)
	}
	claim, err := p.readClaim(ctx, pl, podClaim)
	if err != nil {
		return fail(err)
	}
	var ids []string
	drivers := map[string]string{}
	for _, d := range claim.Devices {
		if request == "" || d.Request == request {
			ids = append(ids, d.Device)
			drivers[d.Device] = d.Driver
		}
	}
	what := "resource claim " + podClaim + " (ResourceClaim " + claim.Name + ")"
	if request != "" {
		what += " request " + request
	}
	assigned, err := p.assign(pl, what, ids, atts)
	if err != nil {
		return err
	}
	for i, a := range atts {
		a.ResourceClaim, a.Driver = claim.Name, drivers[assigned[i]]
		if err := p.setDeviceInfo(a, "", assigned[i], containerID); err != nil {
			return fail(err)
		}
	}
	return nil
}

// readClaim reads the ResourceClaim behind the pod's claim, which must be
// reserved for this pod: a NAD cannot hand it another pod's device.
func (p *Pipeline) readClaim(ctx context.Context, pl *plan, podClaim string) (*source.ResourceClaim, error) {
	reader, ok := p.Source.(source.ResourceClaimReader)
	if !ok {
		return nil, fmt.Errorf("the NAD names resource claim %q, but the pod source cannot read ResourceClaims", podClaim)
	}
	if pl.pod.ResourceClaims == nil {
		// The pod came from the runtime's annotations, which lack its claims.
		pod, err := p.Source.Pod(ctx, pl.pod.Namespace, pl.pod.Name)
		if err != nil {
			return nil, fmt.Errorf("reading the pod for its resource claims: %w", err)
		}
		pl.pod.ResourceClaims = pod.ResourceClaims
	}
	name, err := claimOf(pl.pod, podClaim)
	if err != nil {
		return nil, err
	}
	claim, err := reader.ResourceClaim(ctx, pl.pod.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("resource claim %q: %w", podClaim, err)
	}
	if pl.pod.UID != "" && !slices.Contains(claim.ReservedFor, pl.pod.UID) {
		return nil, fmt.Errorf("ResourceClaim %s/%s is not reserved for this pod (UID %s)", claim.Namespace, claim.Name, pl.pod.UID)
	}
	return claim, nil
}

// claimOf is the ResourceClaim behind the pod's claim podClaim.
func claimOf(pod *source.Pod, podClaim string) (string, error) {
	name, ok := pod.ResourceClaims[podClaim]
	switch {
	case !ok:
		return "", fmt.Errorf("the NAD names resource claim %q, which the pod does not have (spec.resourceClaims: %s)", podClaim, claimList(pod.ResourceClaims))
	case name == "":
		return "", fmt.Errorf("resource claim %q of the pod has no ResourceClaim yet (status.resourceClaimStatuses)", podClaim)
	}
	return name, nil
}

func claimList(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
