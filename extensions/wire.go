package extensions

import (
	"encoding/json"
	"fmt"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
)

// The JSON documents of ABI v1 (sdk/ABI.md). Unknown fields are ignored in
// both directions, so either side may add fields without a new ABI version.

type wirePod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

type wireNetwork struct {
	// Namespace and Name are the NetworkAttachmentDefinition's.
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	StatusName string `json:"statusName"`
	Default    bool   `json:"default"`
	Index      int    `json:"index"`
}

type wireCommon struct {
	ABI          int                        `json:"abi"`
	Hook         string                     `json:"hook"`
	Pod          wirePod                    `json:"pod"`
	Network      wireNetwork                `json:"network"`
	IfName       string                     `json:"ifName"`
	Keys         map[string]json.RawMessage `json:"keys"`
	ModuleConfig json.RawMessage            `json:"moduleConfig,omitempty"`
}

type prepareInput struct {
	wireCommon
	Config     json.RawMessage   `json:"config"`
	CNIArgs    map[string]string `json:"cniArgs"`
	ConfigArgs map[string]any    `json:"configArgs"`
}

type enrichInput struct {
	wireCommon
	Status         json.RawMessage   `json:"status"`
	Result         json.RawMessage   `json:"result,omitempty"`
	NADAnnotations map[string]string `json:"nadAnnotations,omitempty"`
}

type wireRejection struct {
	Message string `json:"message"`
}

// wireOutput is what a hook writes; each hook reads its own fields.
type wireOutput struct {
	Config        json.RawMessage            `json:"config,omitempty"`
	AddCNIArgs    map[string]string          `json:"addCNIArgs,omitempty"`
	AddConfigArgs map[string]json.RawMessage `json:"addConfigArgs,omitempty"`
	Status        map[string]json.RawMessage `json:"status,omitempty"`
	Warnings      []string                   `json:"warnings,omitempty"`
	Reject        *wireRejection             `json:"reject,omitempty"`
	Error         string                     `json:"error,omitempty"`
}

func decodeOutput(b []byte) (*wireOutput, error) {
	var out wireOutput
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("output is not a JSON object: %w", err)
	}
	return &out, nil
}

func common(hook string, m *module, pod *source.Pod, a *pipeline.Attachment, keys map[string]json.RawMessage) wireCommon {
	c := wireCommon{
		ABI: ABIVersion, Hook: hook, IfName: a.IfName, Keys: keys,
		Network: wireNetwork{StatusName: a.Name, Default: a.Default, Index: a.Index},
	}
	if keys == nil {
		c.Keys = map[string]json.RawMessage{}
	}
	if len(m.config) > 0 {
		c.ModuleConfig = m.config
	}
	if pod != nil {
		c.Pod = wirePod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	}
	switch {
	case a.NAD != nil:
		c.Network.Namespace, c.Network.Name = a.NAD.Namespace, a.NAD.Name
	case a.Selection != nil:
		c.Network.Namespace, c.Network.Name = a.Selection.Namespace, a.Selection.Name
	}
	return c
}

// cniArgsMap turns CNI_ARGS pairs into the object modules see; a later
// pair wins, as it does when CNI_ARGS is parsed.
func cniArgsMap(pairs [][2]string) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return m
}

func newPrepareInput(m *module, req *pipeline.PrepareRequest, keys map[string]json.RawMessage) *prepareInput {
	a := req.Attachment
	in := &prepareInput{
		wireCommon: common(HookPrepare, m, req.Pod, a, keys),
		Config:     a.Config, CNIArgs: cniArgsMap(a.CNIArgs), ConfigArgs: a.ConfigArgs,
	}
	if in.ConfigArgs == nil {
		in.ConfigArgs = map[string]any{}
	}
	return in
}

func newEnrichInput(m *module, req *pipeline.EnrichRequest, keys map[string]json.RawMessage) (*enrichInput, error) {
	a := req.Attachment
	in := &enrichInput{wireCommon: common(HookEnrich, m, req.Pod, a, keys)}
	var err error
	if in.Status, err = json.Marshal(req.Entry); err != nil {
		return nil, fmt.Errorf("encoding the status entry: %w", err)
	}
	if a.Result != nil {
		// Modules get one result format: CNI 1.0.0, whatever the delegate spoke.
		r, err := types100.NewResultFromResult(a.Result)
		if err != nil {
			return nil, fmt.Errorf("converting the %s result: %w", a.Result.Version(), err)
		}
		if in.Result, err = json.Marshal(r); err != nil {
			return nil, err
		}
	}
	if a.NAD != nil {
		in.NADAnnotations = a.NAD.Annotations
	}
	return in, nil
}
