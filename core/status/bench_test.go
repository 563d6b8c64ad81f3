package status

import (
	"testing"

	"github.com/containernetworking/cni/pkg/types/create"
)

func BenchmarkBuildStatus(b *testing.B) {
	res, err := create.Create("0.3.1", []byte(results["v031"]))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		entries := make([]*Entry, 0, 5)
		for i := 0; i < 5; i++ {
			e, err := FromResult("ns/net", "net1", i == 0, res)
			if err != nil {
				b.Fatal(err)
			}
			entries = append(entries, e)
		}
		if _, err := Marshal(entries); err != nil {
			b.Fatal(err)
		}
	}
}
