package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk"
)

func request(conf, value string) *sdk.PrepareRequest {
	return &sdk.PrepareRequest{
		Request: sdk.Request{
			Network: sdk.Network{Namespace: "default", Name: "net"},
			Keys:    map[string]json.RawMessage{vlanKey: json.RawMessage(value)},
		},
		Config: json.RawMessage(conf),
	}
}

const bridge = `{"cniVersion":"1.0.0","name":"br","type":"bridge","bridge":"br0"}`

func TestBridgeGetsVlan(t *testing.T) {
	out, err := sdk.RunPrepare(Module(), request(bridge, "100"))
	if err != nil || out.Reject != nil || out.Error != "" {
		t.Fatalf("out = %+v, %v", out, err)
	}
	var conf map[string]any
	_ = json.Unmarshal(out.Config, &conf)
	if conf["vlan"] != float64(100) || conf["bridge"] != "br0" {
		t.Fatalf("config = %s", out.Config)
	}
}

func TestVlanPluginInListGetsVlanID(t *testing.T) {
	list := `{"cniVersion":"1.0.0","name":"v","plugins":[{"type":"vlan","master":"eth0"},{"type":"tuning"}]}`
	out, _ := sdk.RunPrepare(Module(), request(list, "4094"))
	if out.Reject != nil || out.Error != "" {
		t.Fatalf("out = %+v", out)
	}
	var conf struct {
		Plugins []map[string]any `json:"plugins"`
	}
	_ = json.Unmarshal(out.Config, &conf)
	if len(conf.Plugins) != 2 || conf.Plugins[0]["vlanId"] != float64(4094) {
		t.Fatalf("config = %s", out.Config)
	}
}

func TestRejections(t *testing.T) {
	macvlan := `{"cniVersion":"1.0.0","name":"m","type":"macvlan"}`
	cases := []struct{ conf, value, want string }{
		{bridge, "0", "between 1 and 4094, got 0"},
		{bridge, "4095", "between 1 and 4094, got 4095"},
		{bridge, "1.5", "must be an integer"},
		{bridge, `"100"`, "must be an integer"},
		{macvlan, "100", "no bridge or vlan plugin (plugin types: [macvlan])"},
	}
	for _, c := range cases {
		out, _ := sdk.RunPrepare(Module(), request(c.conf, c.value))
		if out.Reject == nil || !strings.Contains(out.Reject.Message, c.want) {
			t.Errorf("value %s on %s: out = %+v, want rejection %q", c.value, c.conf, out, c.want)
		}
	}
}

func TestRejectsUnknownKey(t *testing.T) {
	req := request(bridge, "100")
	req.Keys["com.example.qos"] = json.RawMessage(`1`)
	out, _ := sdk.RunPrepare(Module(), req)
	if out.Reject == nil || !strings.Contains(out.Reject.Message, `"com.example.qos"`) {
		t.Fatalf("out = %+v", out)
	}
}
