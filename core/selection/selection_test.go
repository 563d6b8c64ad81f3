package selection

import (
	"errors"
	"strings"
	"testing"
)

func TestParseS4_1_1CommaFormat(t *testing.T) {
	res, err := Parse(" net-a, net-b ,other-ns/net-c", "my-ns")
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != FormatComma {
		t.Errorf("format = %q", res.Format)
	}
	want := []string{"my-ns/net-a", "my-ns/net-b", "other-ns/net-c"}
	if len(res.Elements) != len(want) {
		t.Fatalf("got %d elements", len(res.Elements))
	}
	for i, w := range want {
		if got := res.Elements[i].Ref(); got != w {
			t.Errorf("element %d = %s, want %s", i, got, w)
		}
		if res.Elements[i].Index != i {
			t.Errorf("element %d index = %d", i, res.Elements[i].Index)
		}
	}
	if string(res.Elements[2].Raw) != `{"name":"net-c","namespace":"other-ns"}` {
		t.Errorf("raw = %s", res.Elements[2].Raw)
	}
}

func TestParseS4_1_2JSONFormat(t *testing.T) {
	ann := `[
	  { "name": "net-a" },
	  { "name": "net-b", "ips": ["1.2.3.4", "2001:db8::5", "10.0.0.1/24"], "mac": "aa:bb:cc:dd:ee:ff", "interface": "data0" },
	  { "name": "net-c", "namespace": "other-ns" },
	  { "name": "net-d", "namespace": "" }
	]`
	res, err := Parse(ann, "my-ns")
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != FormatJSON || len(res.Elements) != 4 {
		t.Fatalf("format %q, %d elements", res.Format, len(res.Elements))
	}
	b := res.Elements[1]
	if len(b.IPs) != 3 || b.MAC != "aa:bb:cc:dd:ee:ff" || b.Interface != "data0" {
		t.Errorf("element 1 = %+v", b)
	}
	if got := res.Elements[2].Ref(); got != "other-ns/net-c" {
		t.Errorf("element 2 = %s", got)
	}
	if got := res.Elements[3].Ref(); got != "my-ns/net-d" {
		t.Errorf("empty namespace must mean the pod's: got %s", got)
	}
}

func TestParseS4_2RepeatedNetworkIsTwoElements(t *testing.T) {
	res, err := Parse("net-a,net-a", "ns")
	if err != nil || len(res.Elements) != 2 {
		t.Fatalf("err %v, %d elements", err, len(res.Elements))
	}
}

func TestParseS4_1_2_1ReverseDomainKeysCarried(t *testing.T) {
	res, err := Parse(`[{"name":"n","com.example.vlan":100,"io.plexus.overrides":{"mtu":1400},"color":"red"}]`, "ns")
	if err != nil {
		t.Fatal(err)
	}
	el := res.Elements[0]
	if string(el.Extensions["com.example.vlan"]) != "100" || string(el.Extensions["io.plexus.overrides"]) != `{"mtu":1400}` {
		t.Errorf("extensions = %v", el.Extensions)
	}
	if _, ok := el.Extensions["color"]; ok {
		t.Error("a key without a period must not reach the extension stage")
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], `"color"`) {
		t.Errorf("warnings = %q", res.Warnings)
	}
}

func TestParseEmptySelectsNothing(t *testing.T) {
	for _, v := range []string{"", "  ", "\n"} {
		res, err := Parse(v, "ns")
		if err != nil || len(res.Elements) != 0 {
			t.Errorf("Parse(%q) = %v, %v", v, res, err)
		}
	}
	res, err := Parse("[]", "ns")
	if err != nil || len(res.Elements) != 0 {
		t.Errorf("Parse([]) = %v, %v", res, err)
	}
}

func TestParseInvalidAnnotations(t *testing.T) {
	tests := []struct {
		name, value, wantInErr string
		index                  int
	}{
		{"s3.3 upper case name", "Net-A", "DNS-1123", 0},
		{"s3.3 bad namespace", "net-a,Bad_NS/net-b", "namespace", 1},
		{"comma format empty element", "net-a,,net-b", "empty", 1},
		{"too many slashes", "a/b/c", "DNS-1123", 0},
		{"path as name", "../../etc/passwd", "DNS-1123", 0},
		{"json not a list", `{"name":"a"}`, "list of objects", -1},
		{"json broken", `[{"name":"a"`, "not a JSON list", -1},
		{"json element not object", `["net-a"]`, "JSON object", 0},
		{"missing name", `[{"namespace":"x"}]`, `"name" is missing`, 0},
		{"name not string", `[{"name":5}]`, "must be a string", 0},
		{"s4.1.2.1.3 ips empty", `[{"name":"a","ips":[]}]`, "at least one", 0},
		{"s4.1.2.1.3 ips invalid", `[{"name":"a","ips":["1.2.3.4","nope"]}]`, `"nope"`, 0},
		{"s4.1.2.1.3 ips not list", `[{"name":"a","ips":"1.2.3.4"}]`, "list of strings", 0},
		{"s4.1.2.1.3 ips null", `[{"name":"a","ips":null}]`, "at least one", 0},
		{"s4.1.2.1.4 mac invalid", `[{"name":"a","mac":"zz:bb:cc:dd:ee:ff"}]`, "hardware address", 0},
		{"s4.1.2.1.4 mac 8 bytes", `[{"name":"a","mac":"01:23:45:67:89:ab:cd:ef"}]`, "hardware address", 0},
		{"s4.1.2.1.5 interface too long", `[{"name":"a","interface":"abcdefghijklmnop"}]`, "interface", 0},
		{"s4.1.2.1.5 interface slash", `[{"name":"a","interface":"../x"}]`, "interface", 0},
		{"s4.1.2.1.5 interface lo reserved", `[{"name":"a","interface":"lo"}]`, "reserved by the kernel", 0},
		{"s4.1.2.1.5 interface all reserved", `[{"name":"a","interface":"all"}]`, "reserved by the kernel", 0},
		{"s4.1.2.1.5 interface empty", `[{"name":"b"},{"name":"a","interface":""}]`, "interface", 1},
		{"second element bad", `[{"name":"a"},{"name":"B"}]`, "DNS-1123", 1},
		{"oversized", strings.Repeat("a,", MaxAnnotationBytes), "exceeds the limit", -1},
		{"too many selections", strings.Repeat("a,", MaxSelections) + "a", "exceed the limit", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.value, "ns")
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("want *Error, got %v", err)
			}
			if perr.Index != tt.index {
				t.Errorf("index = %d, want %d (%v)", perr.Index, tt.index, err)
			}
			if !strings.Contains(err.Error(), tt.wantInErr) || !strings.Contains(err.Error(), Annotation) {
				t.Errorf("error %q should contain %q and the annotation name", err, tt.wantInErr)
			}
		})
	}
}

func TestParseS4_1_2_1_4InfiniBandMAC(t *testing.T) {
	ib := "80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22"
	res, err := Parse(`[{"name":"ib","mac":"`+ib+`"}]`, "ns")
	if err != nil || res.Elements[0].MAC != ib {
		t.Fatalf("20-byte InfiniBand address refused: %v", err)
	}
}
