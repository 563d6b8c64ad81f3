package selection

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var compatOn = ParseOptions{Compat: true}

func TestParseCompatCommaInterface(t *testing.T) {
	tests := []struct {
		name, ann string
		refs      []string
		ifNames   []string
		wantErr   string
	}{
		{"name@ifname", "net-a@eth1", []string{"ns/net-a"}, []string{"eth1"}, ""},
		{"ns/name@ifname and plain", "other/net-b@data0, net-c", []string{"other/net-b", "ns/net-c"}, []string{"data0", ""}, ""},
		{"interface too long", "net-a@abcdefghijklmnop", nil, nil, `element 0: reference "net-a@abcdefghijklmnop": interface after "@"`},
		{"interface with a slash", "net-a@a/b", nil, nil, `interface after "@"`},
		{"interface lo", "net-a@lo", nil, nil, `reserved by the kernel`},
		{"empty interface", "net-a@", nil, nil, `interface after "@"`},
		{"@ inside the name part", "ns@x/net-a", nil, nil, `element 0: reference "ns@x/net-a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ParseWith(tt.ann, "ns", compatOn)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, el := range res.Elements {
				if el.Ref() != tt.refs[i] || el.Interface != tt.ifNames[i] {
					t.Errorf("element %d = %s@%s, want %s@%s", i, el.Ref(), el.Interface, tt.refs[i], tt.ifNames[i])
				}
			}
		})
	}
	// s4.1.1 alone: "@" is not part of a DNS-1123 label, so the whole
	// annotation is invalid, as before.
	if _, err := Parse("net-a@eth1", "ns"); err == nil {
		t.Error("without compat, net-a@eth1 must be an invalid reference")
	}
	res, _ := ParseWith("net-a@eth1", "ns", compatOn)
	if got := string(res.Elements[0].Raw); got != `{"name":"net-a","namespace":"ns","interface":"eth1"}` {
		t.Errorf("raw = %s", got)
	}
}

func TestParseCompatKeys(t *testing.T) {
	tests := []struct {
		name    string
		el      string // keys added to {"name":"n", ...}
		want    *Compat
		wantErr string
	}{
		{"default-route v4 and v6", `"default-route":["10.1.0.1","fd00::1"]`, &Compat{DefaultRoute: []string{"10.1.0.1", "fd00::1"}}, ""},
		{"default-route not a list", `"default-route":"10.1.0.1"`, nil, `element 0: key "default-route": must be a list`},
		{"default-route empty", `"default-route":[]`, nil, `at least one gateway`},
		{"default-route bad address", `"default-route":["10.1.0.300"]`, nil, `element 0 ("10.1.0.300") is not an IPv4 or IPv6 address`},
		{"default-route CIDR", `"default-route":["10.1.0.1/24"]`, nil, `is not an IPv4 or IPv6 address`},
		{"default-route unspecified", `"default-route":["0.0.0.0"]`, nil, `cannot be a gateway`},
		{"default-route two v4", `"default-route":["10.1.0.1","10.1.0.2"]`, nil, `elements 0 and 1 are both IPv4 gateways`},

		{"cni-args", `"cni-args":{"foo":"bar","n":1.50}`, &Compat{CNIArgs: map[string]any{"foo": "bar", "n": jsonNumber("1.50")}}, ""},
		{"cni-args not an object", `"cni-args":["foo"]`, nil, `key "cni-args": must be a JSON object`},
		{"cni-args null", `"cni-args":null`, nil, `key "cni-args": must be a JSON object`},
		// A delegate decodes args.cni with encoding/json, which matches keys
		// ignoring case (Unicode simple folding): each of these would reach
		// it as "ips", "mac" or "infiniband-guid", past the policy and past
		// plexus's check of requested addresses.
		{"cni-args ips refused", `"cni-args":{"ips":["1.2.3.4"],"x":true}`, nil, `key "cni-args": key "ips" is read by delegates as "ips", which plexus sets only from the element's own "ips" key`},
		{"cni-args IPs refused", `"cni-args":{"IPs":["10.77.9.99/24"]}`, nil, `key "IPs" is read by delegates as "ips"`},
		{"cni-args ips with long s refused", `"cni-args":{"ip\u017f":["10.77.9.99/24"]}`, nil, `key "ipſ" is read by delegates as "ips"`},
		{"cni-args MAC refused", `"cni-args":{"MAC":"02:00:00:00:00:99"}`, nil, `key "MAC" is read by delegates as "mac"`},
		{"cni-args Mac refused", `"cni-args":{"Mac":"02:00:00:00:00:99"}`, nil, `key "Mac" is read by delegates as "mac"`},
		{"cni-args infiniband_guid refused", `"cni-args":{"Infiniband_GUID":"x"}`, nil, `key "Infiniband_GUID" is read by delegates as "infiniband-guid"`},
		{"cni-args keys folding together refused", `"cni-args":{"mtu":1400,"MTU":9000}`, nil, `keys "MTU" and "mtu" are the same key to a delegate`},
		{"cni-args kelvin sign folds to k", `"cni-args":{"k":1,"\u212a":2}`, nil, "keys \"k\" and \"\u212a\" are the same key to a delegate"},
		{"cni-args keys near the spec's accepted", `"cni-args":{"ipsx":1,"macaddr":"x","ip":"y"}`, &Compat{CNIArgs: map[string]any{"ipsx": jsonNumber("1"), "macaddr": "x", "ip": "y"}}, ""},

		{"portMappings", `"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"TCP","hostIP":"127.0.0.1"},{"hostPort":53,"containerPort":53,"protocol":"udp"}]`,
			&Compat{PortMappings: []PortMapping{{8080, 80, "tcp", "127.0.0.1"}, {53, 53, "udp", ""}}}, ""},
		{"portMappings port 0", `"portMappings":[{"hostPort":0,"containerPort":80}]`, nil, `key "portMappings": element 0: "hostPort" must be a whole number from 1 to 65535, not 0`},
		{"portMappings port too big", `"portMappings":[{"hostPort":80,"containerPort":65536}]`, nil, `"containerPort" must be a whole number from 1 to 65535`},
		{"portMappings fraction", `"portMappings":[{"hostPort":80.5,"containerPort":80}]`, nil, `"hostPort" must be a whole number`},
		{"portMappings port missing", `"portMappings":[{"hostPort":80}]`, nil, `"containerPort" is required`},
		{"portMappings protocol", `"portMappings":[{"hostPort":80,"containerPort":80,"protocol":"icmp"}]`, nil, `"protocol" "icmp" is not one of tcp, udp, sctp`},
		{"portMappings hostIP", `"portMappings":[{"hostPort":80,"containerPort":80,"hostIP":"localhost"}]`, nil, `"hostIP" must be an IPv4 or IPv6 address`},
		{"portMappings unknown key", `"portMappings":[{"hostPort":80,"containerPort":80,"host":"x"}]`, nil, `unknown key "host"`},
		{"portMappings empty", `"portMappings":[]`, nil, `at least one port mapping`},

		{"bandwidth", `"bandwidth":{"ingressRate":1000000,"ingressBurst":0,"egressRate":2000000,"egressBurst":1000}`, &Compat{Bandwidth: &Bandwidth{1000000, 0, 2000000, 1000}}, ""},
		{"bandwidth negative", `"bandwidth":{"ingressRate":-1}`, nil, `key "bandwidth": "ingressRate" must be a whole number from 0`},
		{"bandwidth string", `"bandwidth":{"egressRate":"1M"}`, nil, `"egressRate" must be a whole number`},
		{"bandwidth unknown key", `"bandwidth":{"rate":1}`, nil, `unknown key "rate"`},
		{"bandwidth empty", `"bandwidth":{}`, nil, `must set at least one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ParseWith(`[{"name":"n",`+tt.el+`}]`, "ns", compatOn)
			if tt.wantErr != "" {
				var pe *Error
				if err == nil || !errors.As(err, &pe) || pe.Index != 0 || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want element 0 and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Elements[0].Compat; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("compat = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseCompatIgnoredKeysAreRecorded(t *testing.T) {
	ann := `[{"name":"n","default-route":["10.1.0.1"],"cni-args":{"mtu":1400},"color":"red"}]`
	tests := []struct {
		name string
		o    ParseOptions
		want map[string]string
	}{
		{"compat off ignores the compat keys", ParseOptions{}, map[string]string{
			"default-route": "Multus compatibility is off", "cni-args": "Multus compatibility is off", "color": "reserved by the specification"}},
		{"compat on ignores unknown keys", compatOn, map[string]string{
			"color": "reserved by the specification"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ParseWith(ann, "ns", tt.o)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Elements[0].Ignored
			if len(got) != len(tt.want) {
				t.Fatalf("ignored = %v, want keys of %v", got, tt.want)
			}
			for k, reason := range tt.want {
				if !strings.Contains(got[k], reason) {
					t.Errorf("ignored[%q] = %q, want it to say %q", k, got[k], reason)
				}
			}
			if tt.o.Compat != (res.Elements[0].Compat != nil) {
				t.Errorf("compat = %+v with options %+v", res.Elements[0].Compat, tt.o)
			}
		})
	}
}

func TestParseCompatOneDefaultRoutePerFamily(t *testing.T) {
	_, err := ParseWith(`[{"name":"a","default-route":["10.1.0.1"]},{"name":"b","default-route":["fd00::1"]},{"name":"c","default-route":["10.2.0.1"]}]`, "ns", compatOn)
	if err == nil || !strings.Contains(err.Error(), `element 2: key "default-route": element 0 already sets the IPv4 default route`) {
		t.Fatalf("err = %v", err)
	}
}

func jsonNumber(s string) any { return json.Number(s) }
