package extensions

import (
	"encoding/json"
	"fmt"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/sdk/abi"
)

// enrichInput sends the whole status entry, reverse-domain keys included,
// where abi.EnrichRequest decodes only the specification's fields: the
// shallower Status field wins in encoding/json.
type enrichInput struct {
	abi.EnrichRequest
	Status json.RawMessage `json:"status"`
}

// wireOutput is what a hook writes, values kept as the guest wrote them.
type wireOutput = abi.Output[json.RawMessage]

func decodeOutput(b []byte) (*wireOutput, error) {
	var out wireOutput
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("output is not a JSON object: %w", err)
	}
	return &out, nil
}

func common(hook string, m *module, pod *source.Pod, a *pipeline.Attachment, keys map[string]json.RawMessage) abi.Request {
	c := abi.Request{
		ABI: abi.Version, Hook: hook, IfName: a.IfName, Keys: keys,
		Network: abi.Network{StatusName: a.Name, Default: a.Default, Index: a.Index},
	}
	if keys == nil {
		c.Keys = map[string]json.RawMessage{}
	}
	if len(m.config) > 0 {
		c.ModuleConfig = m.config
	}
	if pod != nil {
		c.Pod = abi.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
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

func newPrepareInput(m *module, req *pipeline.PrepareRequest, keys map[string]json.RawMessage) *abi.PrepareRequest {
	a := req.Attachment
	in := &abi.PrepareRequest{
		Request: common(abi.HookPrepare, m, req.Pod, a, keys),
		Config:  a.Config, CNIArgs: cniArgsMap(a.CNIArgs), ConfigArgs: a.ConfigArgs,
	}
	if in.ConfigArgs == nil {
		in.ConfigArgs = map[string]any{}
	}
	return in
}

func newEnrichInput(m *module, req *pipeline.EnrichRequest, keys map[string]json.RawMessage) (*enrichInput, error) {
	a := req.Attachment
	in := &enrichInput{EnrichRequest: abi.EnrichRequest{Request: common(abi.HookEnrich, m, req.Pod, a, keys)}}
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
