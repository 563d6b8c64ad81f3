package names

import (
	"strings"
	"testing"
)

func TestLabelS3_3(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"net-a", true},
		{"a", true},
		{"0net", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"Net", false},
		{"-net", false},
		{"net-", false},
		{"net_a", false},
		{"net.a", false},
		{"../etc", false},
		{"a/b", false},
	}
	for _, tt := range tests {
		err := Label("NAD name", tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("Label(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "NAD name") {
			t.Errorf("Label(%q) error %q does not say what was wrong", tt.in, err)
		}
	}
}

func TestSubdomainPodNames(t *testing.T) {
	for in, ok := range map[string]bool{"pod-1": true, "a.b-c": true, "": false, "Pod": false, "a..b": false, "a/b": false} {
		if err := Subdomain("pod name", in); (err == nil) != ok {
			t.Errorf("Subdomain(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestInterfaceNamesLinuxRules(t *testing.T) {
	for in, ok := range map[string]bool{
		"eth0": true, "net1": true, "a-b_c.d": true, "123456789012345": true,
		"": false, "1234567890123456": false, ".": false, "..": false,
		"a/b": false, "a:b": false, "a b": false, "a\tb": false,
	} {
		if err := Interface(in); (err == nil) != ok {
			t.Errorf("Interface(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestSecondaryInterfaceNamesLeaveTheKernelsOwn(t *testing.T) {
	for in, ok := range map[string]bool{
		"net1": true, "lo0": true, "alldata": true, "eth0": true,
		"lo": false, "all": false, "default": false, "a/b": false, "": false,
	} {
		if err := SecondaryInterface(in); (err == nil) != ok {
			t.Errorf("SecondaryInterface(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestPluginTypeIsNeverAPath(t *testing.T) {
	for in, ok := range map[string]bool{
		"bridge": true, "host-local": true, "my_plugin.v2": true,
		"": false, "../bin/sh": false, "/bin/sh": false, "a/b": false, ".": false, "..": false, ".hidden": false,
	} {
		if err := PluginType(in); (err == nil) != ok {
			t.Errorf("PluginType(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestNetworkAndContainerID(t *testing.T) {
	if err := Network("a/b"); err == nil {
		t.Error("Network accepted a separator")
	}
	if err := Network("net-a.1_x"); err != nil {
		t.Error(err)
	}
	if err := ContainerID("../x"); err == nil {
		t.Error("ContainerID accepted a path")
	}
	if err := ContainerID("cnitool-abc123"); err != nil {
		t.Error(err)
	}
}

func TestTruncateLongInput(t *testing.T) {
	err := Label("NAD name", strings.Repeat("X", 10000))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("long input not truncated in error: %d bytes", len(err.Error()))
	}
}
