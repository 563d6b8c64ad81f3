package names

import (
	"strings"
	"testing"
	"unicode/utf8"
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
		{strings.Repeat("a", 62) + "-", false},
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
	for in, ok := range map[string]bool{
		"pod-1": true, "a.b-c": true, "": false, "Pod": false, "a..b": false, "a/b": false,
		// apimachinery's length limit: 253 characters, each label at most 63.
		strings.Repeat("a.", 126) + "a": true, strings.Repeat("a.", 126) + "ab": false,
	} {
		if err := Subdomain("pod name", in); (err == nil) != ok {
			t.Errorf("Subdomain(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

// Extended resource names follow Kubernetes' IsExtendedResourceName:
// outside kubernetes.io, and still a qualified name once prefixed with
// "requests." (so the domain part has 9 characters fewer than 253).
func TestResourceNameIsAnExtendedResourceName(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		in   string
		ok   bool
		says string
	}{
		{"vendor.example/netdev", true, ""},
		{"intel.com/sriov_netdevice", true, ""},
		{"a/B.c-d_e", true, ""},
		{"", false, "empty"},
		{"netdev", false, "domain prefix"},
		{"Vendor.example/netdev", false, "RFC 1123 subdomain"},
		{"vendor.example/-netdev", false, "name part"},
		{"a/b/c", false, "label key"},
		{"kubernetes.io/netdev", false, "kubernetes.io/"},
		{"sub.kubernetes.io/netdev", false, "kubernetes.io/"},
		{"requests.example/netdev", false, "requests."},
		{"vendor.example/" + long(63), true, ""},
		{"vendor.example/" + long(64), false, "63"},
		{long(63) + "." + long(63) + "." + long(63) + "." + long(52) + "/x", true, ""},
		{long(63) + "." + long(63) + "." + long(63) + "." + long(53) + "/x", false, "253"},
	}
	for _, tt := range tests {
		err := ResourceName("resource name", tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ResourceName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "resource name") || !strings.Contains(err.Error(), tt.says)) {
			t.Errorf("ResourceName(%q) error %q does not say what was wrong (%q)", tt.in, err, tt.says)
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

func TestTruncateKeepsRunesAndTheBound(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc", 4, "abc"},
		{"abcdef", 5, "ab..."},
		{"abéé", 6, "abéé"},
		{"abééé", 7, "abé..."},
		{"ééé", 5, "é..."},
		{"abcdef", 2, ".."},
	} {
		got := Truncate(tc.in, tc.max)
		if got != tc.want || len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
