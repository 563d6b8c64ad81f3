package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Handle runs one hook on a JSON input and returns the JSON output, as the
// wasm exports do. A panic in the hook becomes an error output, so the
// instance survives and the host reports the module's failure.
func Handle(m Module, hook string, input []byte) (out []byte) {
	defer func() {
		if r := recover(); r != nil {
			out = encode(&Output{Error: fmt.Sprintf("panic in %s hook: %v", hook, r)})
		}
	}()
	return encode(dispatch(m, hook, input))
}

func dispatch(m Module, hook string, input []byte) *Output {
	switch {
	case hook == HookPrepare && m.Prepare != nil:
		var req PrepareRequest
		if err := json.Unmarshal(input, &req); err != nil {
			return &Output{Error: "decoding prepare input: " + err.Error()}
		}
		resp, err := m.Prepare(&req)
		return prepareOutput(resp, err)
	case hook == HookEnrich && m.Enrich != nil:
		var req EnrichRequest
		if err := json.Unmarshal(input, &req); err != nil {
			return &Output{Error: "decoding enrich input: " + err.Error()}
		}
		resp, err := m.Enrich(&req)
		return enrichOutput(resp, err)
	}
	return &Output{Error: fmt.Sprintf("hook %q is not implemented by this module", hook)}
}

func errorOutput(err error) *Output {
	var rej *Rejection
	if errors.As(err, &rej) {
		return &Output{Reject: rej}
	}
	return &Output{Error: err.Error()}
}

func prepareOutput(r *PrepareResponse, err error) *Output {
	if err != nil {
		return errorOutput(err)
	}
	if r == nil {
		return &Output{}
	}
	return &Output{Config: r.Config, AddCNIArgs: r.AddCNIArgs, AddConfigArgs: r.AddConfigArgs, Warnings: r.Warnings}
}

func enrichOutput(r *EnrichResponse, err error) *Output {
	if err != nil {
		return errorOutput(err)
	}
	if r == nil {
		return &Output{}
	}
	return &Output{Status: r.Status, Warnings: r.Warnings}
}

func encode(o *Output) []byte {
	b, err := json.Marshal(o)
	if err != nil {
		b, _ = json.Marshal(&Output{Error: "encoding output: " + err.Error()})
	}
	return b
}

// RunPrepare runs m's prepare hook on req the way the host does, through
// JSON, for native unit tests.
func RunPrepare(m Module, req *PrepareRequest) (*Output, error) {
	req.ABI, req.Hook = ABIVersion, HookPrepare
	return run(m, HookPrepare, req)
}

// RunEnrich runs m's enrich hook on req the way the host does.
func RunEnrich(m Module, req *EnrichRequest) (*Output, error) {
	req.ABI, req.Hook = ABIVersion, HookEnrich
	return run(m, HookEnrich, req)
}

func run(m Module, hook string, req any) (*Output, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out Output
	if err := json.Unmarshal(Handle(m, hook, in), &out); err != nil {
		return nil, err
	}
	return &out, nil
}
