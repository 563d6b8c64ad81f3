package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk"
)

func request(overrides string) *sdk.PrepareRequest {
	return &sdk.PrepareRequest{
		Request: sdk.Request{
			Keys:         map[string]json.RawMessage{key: json.RawMessage(overrides)},
			ModuleConfig: json.RawMessage(`{"allow":["mtu","hairpinMode"]}`),
		},
		Config: json.RawMessage(`{"cniVersion":"1.0.0","name":"br","type":"bridge","mtu":1500}`),
	}
}

func TestSetsAllowedKeys(t *testing.T) {
	out, err := sdk.RunPrepare(Module(), request(`{"mtu":1400,"hairpinMode":true}`))
	if err != nil || out.Reject != nil || out.Error != "" {
		t.Fatalf("out = %+v, %v", out, err)
	}
	var conf map[string]any
	if err := json.Unmarshal(out.Config, &conf); err != nil {
		t.Fatal(err)
	}
	if conf["mtu"] != float64(1400) || conf["hairpinMode"] != true || conf["type"] != "bridge" {
		t.Fatalf("config = %s", out.Config)
	}
}

func TestRejectsDisallowedKey(t *testing.T) {
	out, _ := sdk.RunPrepare(Module(), request(`{"mtu":1400,"ipMasq":true}`))
	if out.Reject == nil || !strings.Contains(out.Reject.Message, `"ipMasq"`) {
		t.Fatalf("out = %+v, want a rejection naming ipMasq", out)
	}
}

func TestNeverOverridesType(t *testing.T) {
	req := request(`{"type":"macvlan"}`)
	req.ModuleConfig = json.RawMessage(`{"allow":["type"]}`)
	out, _ := sdk.RunPrepare(Module(), req)
	if out.Reject == nil || !strings.Contains(out.Reject.Message, `"type"`) {
		t.Fatalf("out = %+v, want a rejection naming type", out)
	}
}

func TestRejectsNonObject(t *testing.T) {
	out, _ := sdk.RunPrepare(Module(), request(`[1]`))
	if out.Reject == nil {
		t.Fatalf("out = %+v, want a rejection", out)
	}
}

func TestRegisteredInInit(t *testing.T) {
	if sdk.Registered().Prepare == nil {
		t.Fatal("init did not register the prepare hook")
	}
}
