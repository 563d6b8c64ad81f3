package selection

import "testing"

func BenchmarkParseComma(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("net-a,net-b,other/net-c,net-a", "ns"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON(b *testing.B) {
	ann := `[{"name":"net-a"},{"name":"net-b","ips":["10.0.0.5/24"],"mac":"02:00:00:00:00:01"},{"name":"net-c","namespace":"other","interface":"data0"},{"name":"net-a","com.example.vlan":100}]`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(ann, "ns"); err != nil {
			b.Fatal(err)
		}
	}
}
