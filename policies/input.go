package policies

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// InputVersion versions the input document (INPUT.md). A change that could
// alter what an existing policy decides gets a new version.
const InputVersion = "plexus.policy/v1"

// BuildInput turns an s7.4 request into the documented input document
// (INPUT.md). It uses maps, slices, strings and bools, which OPA converts
// directly, and JSON (json.RawMessage) for the selection elements as written.
func BuildInput(req *pipeline.AuthorizeRequest) (map[string]any, error) {
	return buildInput(req, inputUse{namespaceLabels: true, nadConfig: true, selections: true})
}

// buildInput leaves out the costly parts the policy cannot read (inputUse),
// which could not change its decision.
func buildInput(req *pipeline.AuthorizeRequest, use inputUse) (map[string]any, error) {
	if req == nil || req.Pod == nil || req.Attachment == nil {
		return nil, fmt.Errorf("authorize request lacks a pod or an attachment")
	}
	att := req.Attachment
	// "labels" stays out when the source does not know them, so that a
	// policy can tell "no labels" from "unknown" (rules on it fail closed).
	ns := map[string]any{"name": req.Pod.Namespace}
	if req.NamespaceLabels != nil {
		ns["labels"] = stringMap(req.NamespaceLabels)
	}
	in := map[string]any{
		"version":   InputVersion,
		"pod":       podInput(req.Pod),
		"namespace": ns,
		"interface": att.IfName,
		"default":   att.Default,
		"origin":    string(att.Origin),
		"nad":       nil,
		"selection": nil,
		"device":    deviceInput(att),
	}
	if att.NAD != nil {
		config := att.Config
		if !use.nadConfig {
			config = nil
		}
		nadIn, err := nadInput(att.NAD, config)
		if err != nil {
			return nil, fmt.Errorf("pod %s, attachment %s: %w", req.Pod.Ref(), att.Name, err)
		}
		in["nad"] = nadIn
	}
	if att.Selection != nil {
		el, err := elementInput(att.Selection)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", req.Pod.Ref(), err)
		}
		in["selection"] = el
	}
	if !use.selections {
		return in, nil
	}
	all := make([]any, 0, len(req.Selections))
	for _, s := range req.Selections {
		el, err := elementInput(s)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", req.Pod.Ref(), err)
		}
		all = append(all, el)
	}
	in["selections"] = all
	return in, nil
}

func podInput(p *source.Pod) map[string]any {
	return map[string]any{
		"namespace":          p.Namespace,
		"name":               p.Name,
		"uid":                p.UID,
		"labels":             stringMap(p.Labels),
		"annotations":        stringMap(p.Annotations),
		"serviceAccountName": p.ServiceAccountName,
		"nodeName":           p.NodeName,
	}
}

func nadInput(n *source.NAD, config json.RawMessage) (map[string]any, error) {
	in := map[string]any{
		"namespace":   n.Namespace,
		"name":        n.Name,
		"labels":      stringMap(n.Labels),
		"annotations": stringMap(n.Annotations),
	}
	if len(bytes.TrimSpace(config)) == 0 {
		return in, nil
	}
	sum, err := configSummary(config)
	if err != nil {
		return nil, fmt.Errorf("network %s/%s: %w", n.Namespace, n.Name, err)
	}
	in["config"] = sum
	return in, nil
}

// cniConf is the part of a CNI config or config list the summary reads.
type cniConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	IPAM       *struct {
		Type string `json:"type"`
	} `json:"ipam"`
	Plugins []*cniConf `json:"plugins"`
}

// configSummary describes the delegate configuration (s3.4) by what admins
// write rules about: the plugin types in order and the IPAM types.
func configSummary(config json.RawMessage) (map[string]any, error) {
	var c cniConf
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("CNI config is not a JSON object: %w", err)
	}
	plugins := c.Plugins
	if plugins == nil {
		plugins = []*cniConf{&c}
	}
	types := make([]string, 0, len(plugins))
	ipam := []string{}
	for _, p := range plugins {
		if p == nil {
			return nil, fmt.Errorf("CNI config list has a null plugin")
		}
		types = append(types, p.Type)
		if p.IPAM != nil && p.IPAM.Type != "" {
			ipam = append(ipam, p.IPAM.Type)
		}
	}
	return map[string]any{
		"cniVersion": c.CNIVersion,
		"name":       c.Name,
		"plugins":    types,
		"ipam":       ipam,
	}, nil
}

// elementInput is one selection element: its index, what it resolved to,
// and the object as the user wrote it (s4.1.2), unchanged under "raw".
func elementInput(e *selection.Element) (map[string]any, error) {
	// The raw object stays JSON until a policy reads it: OPA's lazy input
	// converts a value it does not know through JSON, so a valid
	// json.RawMessage becomes the object, and the decoding is paid only by
	// policies that look at it.
	var raw any = map[string]any{}
	if len(e.Raw) > 0 {
		if !json.Valid(e.Raw) {
			return nil, fmt.Errorf("selection element %d is not valid JSON", e.Index)
		}
		raw = e.Raw
	}
	el := map[string]any{
		"index":     e.Index,
		"name":      e.Name,
		"namespace": e.Namespace,
		"raw":       raw,
	}
	if len(e.IPs) > 0 {
		el["ips"] = e.IPs
	}
	for _, kv := range [...][2]string{{"mac", e.MAC}, {"interface", e.Interface}, {"deviceID", e.DeviceID}, {"infiniband-guid", e.InfinibandGUID}} {
		if kv[1] != "" {
			el[kv[0]] = kv[1]
		}
	}
	if args := e.DelegateArgs(); args != nil {
		el["cniArgs"] = args
	}
	return el, nil
}

// deviceInput is the attachment's device: the NAD's resourceName and the
// device ID kubelet allocated for it or the selection's; nil without one.
func deviceInput(a *pipeline.Attachment) any {
	if a.ResourceName == "" && a.DeviceID == "" {
		return nil
	}
	d := map[string]any{"resourceName": a.ResourceName, "deviceID": a.DeviceID}
	if a.ResourceClaim != "" {
		d["resourceClaim"], d["driver"] = a.ResourceClaim, a.Driver
	}
	return d
}

// stringMap never returns nil, so a policy may index labels and annotations
// of any pod or NAD without first checking that they exist.
func stringMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
