package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/source"
)

// ResourceClaimAnnotation on a NAD names a claim of the pod (DRA,
// resource.k8s.io/v1) as spec.resourceClaims does: "<claim>" or
// "<claim>/<request>". Each attachment of the NAD gets one of its devices.
const ResourceClaimAnnotation = "plexus.io/resource-claim"

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
