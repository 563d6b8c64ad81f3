package sdk

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestHandleRecoversPanic(t *testing.T) {
	m := Module{Prepare: func(*PrepareRequest) (*PrepareResponse, error) { panic("boom") }}
	out, err := RunPrepare(m, &PrepareRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Error, "panic in prepare hook: boom") {
		t.Fatalf("error = %q, want the panic", out.Error)
	}
}

func TestRejectionAndError(t *testing.T) {
	m := Module{
		Prepare: func(*PrepareRequest) (*PrepareResponse, error) { return nil, Reject("vlan %d out of range", 5000) },
		Enrich:  func(*EnrichRequest) (*EnrichResponse, error) { return nil, errors.New("broken") },
	}
	out, _ := RunPrepare(m, &PrepareRequest{})
	if out.Reject == nil || out.Reject.Message != "vlan 5000 out of range" || out.Error != "" {
		t.Fatalf("prepare output = %+v, want a rejection", out)
	}
	out, _ = RunEnrich(m, &EnrichRequest{})
	if out.Reject != nil || out.Error != "broken" {
		t.Fatalf("enrich output = %+v, want an error", out)
	}
}

func TestUnimplementedHook(t *testing.T) {
	out := Handle(Module{}, HookEnrich, []byte(`{}`))
	if !strings.Contains(string(out), "not implemented") {
		t.Fatalf("output = %s", out)
	}
}

func TestBadInputIsAnError(t *testing.T) {
	m := Module{Prepare: func(*PrepareRequest) (*PrepareResponse, error) { return nil, nil }}
	var o Output
	if err := json.Unmarshal(Handle(m, HookPrepare, []byte(`[`)), &o); err != nil || o.Error == "" {
		t.Fatalf("output = %+v, %v; want a decoding error", o, err)
	}
}

func TestRequestKeyAndUnknownFields(t *testing.T) {
	in := `{"abi":1,"hook":"prepare","future":true,"keys":{"com.example.vlan":7},"config":{"type":"bridge"}}`
	m := Module{Prepare: func(r *PrepareRequest) (*PrepareResponse, error) {
		var v int
		if ok, err := r.Key("com.example.vlan", &v); !ok || err != nil || v != 7 {
			return nil, Reject("key: %v %v %d", ok, err, v)
		}
		if ok, _ := r.Key("com.example.other", &v); ok {
			return nil, Reject("absent key reported present")
		}
		return &PrepareResponse{Warnings: []string{"seen"}}, nil
	}}
	var o Output
	if err := json.Unmarshal(Handle(m, HookPrepare, []byte(in)), &o); err != nil {
		t.Fatal(err)
	}
	if o.Reject != nil || len(o.Warnings) != 1 {
		t.Fatalf("output = %+v", o)
	}
}

func TestDelegateEditsListPlugin(t *testing.T) {
	d, err := ParseDelegate(json.RawMessage(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","bridge":"br0"},{"type":"tuning"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !d.IsList() || len(d.Plugins()) != 2 || d.Plugins()[0].Type() != "bridge" {
		t.Fatalf("parsed %+v", d)
	}
	if err := d.Plugins()[0].Set("vlan", 100); err != nil {
		t.Fatal(err)
	}
	raw, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != "n" || back.Plugins[0]["vlan"] != float64(100) || back.Plugins[0]["bridge"] != "br0" {
		t.Fatalf("marshalled %s", raw)
	}
}

func TestParseDelegateRefusesNonObject(t *testing.T) {
	if _, err := ParseDelegate(json.RawMessage(`[1]`)); err == nil {
		t.Fatal("want an error for a list")
	}
}
