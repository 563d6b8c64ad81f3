package kube

import (
	"context"

	"github.com/plexus-cni/plexus/core/source"
)

// claimObject is the part of a resource.k8s.io/v1 ResourceClaim plexus
// reads: what was allocated, for whom, and what the driver reported.
type claimObject struct {
	Status struct {
		Allocation *struct {
			Devices struct {
				Results []struct {
					Request string `json:"request"`
					Driver  string `json:"driver"`
					Pool    string `json:"pool"`
					Device  string `json:"device"`
				} `json:"results"`
			} `json:"devices"`
		} `json:"allocation"`
		ReservedFor []struct {
			Resource string `json:"resource"`
			UID      string `json:"uid"`
		} `json:"reservedFor"`
		Devices []struct {
			Driver      string `json:"driver"`
			Pool        string `json:"pool"`
			Device      string `json:"device"`
			NetworkData *struct {
				InterfaceName   string   `json:"interfaceName"`
				IPs             []string `json:"ips"`
				HardwareAddress string   `json:"hardwareAddress"`
			} `json:"networkData"`
		} `json:"devices"`
	} `json:"status"`
}

// ResourceClaim implements source.ResourceClaimReader (RBAC: get).
func (s *Source) ResourceClaim(ctx context.Context, namespace, name string) (*source.ResourceClaim, error) {
	var o claimObject
	if err := s.get(ctx, "ResourceClaim", "ResourceClaim", namespace, name, &o, "/apis/resource.k8s.io/v1/namespaces", namespace, "resourceclaims", name); err != nil {
		return nil, err
	}
	return o.claim(namespace, name), nil
}

func (o *claimObject) claim(namespace, name string) *source.ResourceClaim {
	c := &source.ResourceClaim{Namespace: namespace, Name: name}
	for _, r := range o.Status.ReservedFor {
		if r.Resource == "pods" {
			c.ReservedFor = append(c.ReservedFor, r.UID)
		}
	}
	if o.Status.Allocation == nil {
		return c
	}
	for _, r := range o.Status.Allocation.Devices.Results {
		d := source.ClaimDevice{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device}
		for _, st := range o.Status.Devices {
			if st.Driver == r.Driver && st.Pool == r.Pool && st.Device == r.Device && st.NetworkData != nil {
				d.InterfaceName, d.HardwareAddress, d.IPs = st.NetworkData.InterfaceName, st.NetworkData.HardwareAddress, st.NetworkData.IPs
			}
		}
		c.Devices = append(c.Devices, d)
	}
	return c
}
