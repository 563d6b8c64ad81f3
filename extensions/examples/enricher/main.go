// Command enricher is a plexus extension adding to every network-status
// entry (s5.3) the gateways of the attachment's addresses,
// "io.plexus.status.gateways", and the NetworkAttachmentDefinition
// annotations its config names, "io.plexus.status.annotations":
//
//	config: {"annotations": ["example.com/owner"]}
package main

import (
	"encoding/json"

	"github.com/plexus-cni/plexus/sdk"
)

const (
	gatewaysKey    = "io.plexus.status.gateways"
	annotationsKey = "io.plexus.status.annotations"
)

type config struct {
	Annotations []string `json:"annotations"`
}

// result is the part of a CNI 1.0.0 result this module reads.
type result struct {
	Interfaces []struct {
		Sandbox string `json:"sandbox"`
	} `json:"interfaces"`
	IPs []struct {
		Gateway   string `json:"gateway"`
		Interface *int   `json:"interface"`
	} `json:"ips"`
}

func init() { sdk.Register(Module()) }

// Module is the extension's hooks.
func Module() sdk.Module { return sdk.Module{Enrich: enrich} }

func main() {}

func enrich(req *sdk.EnrichRequest) (*sdk.EnrichResponse, error) {
	var cfg config
	if err := req.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	resp := &sdk.EnrichResponse{Status: map[string]any{}}
	if len(req.Result) > 0 {
		var r result
		if err := json.Unmarshal(req.Result, &r); err != nil {
			return nil, err
		}
		if gws := gateways(&r); len(gws) > 0 {
			resp.Status[gatewaysKey] = gws
		}
	}
	if ann := pick(req.NADAnnotations, cfg.Annotations); len(ann) > 0 {
		resp.Status[annotationsKey] = ann
	}
	return resp, nil
}

// gateways are those of the addresses on the sandbox interfaces, in order,
// without repeats.
func gateways(r *result) []string {
	var out []string
	seen := map[string]bool{}
	for _, ip := range r.IPs {
		onSandbox := ip.Interface != nil && *ip.Interface >= 0 && *ip.Interface < len(r.Interfaces) &&
			r.Interfaces[*ip.Interface].Sandbox != ""
		if ip.Gateway == "" || !onSandbox || seen[ip.Gateway] {
			continue
		}
		seen[ip.Gateway] = true
		out = append(out, ip.Gateway)
	}
	return out
}

func pick(from map[string]string, names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, ok := from[n]; ok {
			out[n] = v
		}
	}
	return out
}
