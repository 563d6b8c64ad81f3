package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/plexus-cni/plexus/sdk"
)

const res = `{"cniVersion":"1.0.0",
 "interfaces":[{"name":"br0"},{"name":"net1","sandbox":"/var/run/netns/x"}],
 "ips":[{"address":"10.1.0.5/24","gateway":"10.1.0.1","interface":1},
        {"address":"fd00::5/64","gateway":"fd00::1","interface":1},
        {"address":"192.168.0.2/24","gateway":"192.168.0.1","interface":0}]}`

func TestGatewaysAndAnnotations(t *testing.T) {
	req := &sdk.EnrichRequest{
		Request: sdk.Request{ModuleConfig: json.RawMessage(`{"annotations":["example.com/owner","example.com/absent"]}`)},
		Result:  json.RawMessage(res),
		NADAnnotations: map[string]string{
			"example.com/owner": "team-a", "example.com/secret": "no",
		},
	}
	out, err := sdk.RunEnrich(Module(), req)
	if err != nil || out.Error != "" {
		t.Fatalf("out = %+v, %v", out, err)
	}
	want := map[string]any{
		gatewaysKey:    []any{"10.1.0.1", "fd00::1"},
		annotationsKey: map[string]any{"example.com/owner": "team-a"},
	}
	if !reflect.DeepEqual(out.Status, want) {
		t.Fatalf("status = %#v\nwant %#v", out.Status, want)
	}
}

func TestNoResultNoKeys(t *testing.T) {
	out, _ := sdk.RunEnrich(Module(), &sdk.EnrichRequest{})
	if out.Error != "" || len(out.Status) != 0 {
		t.Fatalf("out = %+v, want nothing added", out)
	}
}
