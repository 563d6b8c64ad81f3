package selection

import (
	"strings"
	"testing"
)

func TestParseDefaultNetwork(t *testing.T) {
	tests := []struct {
		value, want, err string
	}{
		{value: "calico", want: "kube-system/calico"},
		{value: " team-a/calico ", want: "team-a/calico"},
		{value: `{"name":"calico"}`, want: "kube-system/calico"},
		{value: `{"name":"calico","namespace":"team-a"}`, want: "team-a/calico"},
		{value: `[{"name":"calico","namespace":"team-a"}]`, want: "team-a/calico"},
		{value: "", err: "empty"},
		{value: "calico@eth0", err: "no @interface"},
		{value: "a,b", err: "not one network reference"},
		{value: "a/b/c", err: `name "b/c"`},
		{value: "../x", err: `namespace ".."`},
		{value: "Calico", err: "DNS-1123"},
		{value: `[]`, err: "exactly one network, not 0"},
		{value: `[{"name":"a"},{"name":"b"}]`, err: "exactly one network, not 2"},
		{value: `{"name":"a","ips":["10.0.0.1"]}`, err: `unknown field "ips"`},
		{value: `{"name":"a"} {}`, err: "trailing data"},
		{value: `{"name":7}`, err: "want an object"},
		{value: `{"namespace":"x"}`, err: `"name" is required`},
		{value: `{"name":"a","namespace":"X"}`, err: `"namespace" "X"`},
		{value: strings.Repeat("a", 2000), err: "exceeds the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			d, err := ParseDefaultNetwork(tt.value, "kube-system")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), DefaultNetworkAnnotation) {
					t.Errorf("got %v, %v; want an error with %q", d, err, tt.err)
				}
				return
			}
			if err != nil || d.Ref() != tt.want {
				t.Errorf("got %v, %v; want %s", d, err, tt.want)
			}
		})
	}
}
