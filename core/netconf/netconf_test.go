package netconf

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseConfAndConflist(t *testing.T) {
	conf := `{"cniVersion":"0.3.1","name":"a","type":"bridge","mtu":1400,"big":12345678901234567890,"ipam":{"type":"host-local"}}`
	c, err := Parse([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	if c.IsList() || c.Name() != "a" || c.CNIVersion() != "0.3.1" {
		t.Errorf("conf parsed as %+v", c)
	}
	if got := c.PluginTypes(); len(got) != 1 || got[0] != "bridge" {
		t.Errorf("types %v", got)
	}
	if got := c.IPAMTypes(); len(got) != 1 || got[0] != "host-local" {
		t.Errorf("ipam %v", got)
	}
	b, _ := c.Bytes()
	if !strings.Contains(string(b), "12345678901234567890") {
		t.Errorf("a large number lost precision: %s", b)
	}
	list := `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge"},{"type":"tuning","capabilities":{"mac":true}}]}`
	c, err = Parse([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsList() || len(c.PluginTypes()) != 2 || !c.HasCapability("mac") || c.HasCapability("ips") {
		t.Errorf("conflist parsed as %+v", c)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"not json", `{`, "not a JSON object"},
		{"array", `[]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"trailing", `{"type":"a"} {}`, "trailing"},
		{"no type", `{"name":"a"}`, `"type"`},
		{"type path", `{"name":"a","type":"../../bin/sh"}`, "plain executable"},
		{"ipam type path", `{"name":"a","type":"bridge","ipam":{"type":"/bin/sh"}}`, "ipam.type"},
		{"ipam not object", `{"name":"a","type":"bridge","ipam":"x"}`, "ipam"},
		{"name path", `{"name":"../x","type":"bridge"}`, "network name"},
		{"name not string", `{"name":1,"type":"bridge"}`, `"name" must be a string`},
		{"version not string", `{"cniVersion":1,"type":"bridge"}`, "cniVersion"},
		{"empty plugins", `{"name":"a","plugins":[]}`, "non-empty"},
		{"plugin not object", `{"name":"a","plugins":[1]}`, "plugin 0"},
		{"plugin bad type", `{"name":"a","plugins":[{"type":"ok"},{"type":"a/b"}]}`, "plugin 1"},
		{"too big", `{"type":"a","x":"` + strings.Repeat("x", MaxBytes) + `"}`, "over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestInjectArgsKeepsAuthorArgs(t *testing.T) {
	c, err := Parse([]byte(`{"name":"l","plugins":[{"type":"bridge","args":{"cni":{"x":1},"other":true}},{"type":"tuning"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InjectArgs(map[string]any{"ips": []string{"10.0.0.5"}, "mac": "02:00:00:00:00:01"}); err != nil {
		t.Fatal(err)
	}
	b, _ := c.Bytes()
	var got struct {
		Plugins []struct {
			Args struct {
				CNI   map[string]any `json:"cni"`
				Other bool           `json:"other"`
			} `json:"args"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for i, p := range got.Plugins {
		if p.Args.CNI["mac"] != "02:00:00:00:00:01" || p.Args.CNI["ips"] == nil {
			t.Errorf("plugin %d args.cni = %v", i, p.Args.CNI)
		}
	}
	if got.Plugins[0].Args.CNI["x"] == nil || !got.Plugins[0].Args.Other {
		t.Error("author's args were lost")
	}
	bad, _ := Parse([]byte(`{"name":"a","type":"bridge","args":"nope"}`))
	if err := bad.InjectArgs(map[string]any{"mac": "x"}); err == nil {
		t.Error("args that is not an object must be an error")
	}
}

func TestConfListSingleConfHasOnePlugin(t *testing.T) {
	l, err := ConfList([]byte(`{"cniVersion":"0.4.0","name":"one","type":"bridge","disableCheck":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Plugins) != 1 || l.Name != "one" || l.CNIVersion != "0.4.0" || !l.DisableCheck {
		t.Errorf("list = %+v", l)
	}
	if l.Plugins[0].Network.Type != "bridge" {
		t.Errorf("plugin type %q", l.Plugins[0].Network.Type)
	}
	if _, err := ConfList([]byte(`{"type":"bridge"}`)); err == nil {
		t.Error("a config without a name must not reach libcni")
	}
}
