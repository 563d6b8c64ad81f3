package selection

import (
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/names"
)

// FuzzParse: any annotation either parses into elements that satisfy every
// s4.1 rule, or yields an *Error; it never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"net-a,other/net-b", "", "[]", `[{"name":"a","ips":["1.2.3.4","fd00::1/64"],"mac":"02:00:00:00:00:01","interface":"x0","com.example.k":{}}]`,
		`[{"name":"a","namespace":""}]`, `{"name":"a"}`, "a/b/c", `[{"name":null}]`, `[{"name":"a","ips":[]}]`,
		"a@eth1,ns/b@x", `[{"name":"a","default-route":["10.0.0.1"],"cni-args":{"k":1},"portMappings":[{"hostPort":1,"containerPort":2}],"bandwidth":{"egressRate":1}}]`,
	} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, v string, compat bool) {
		res, err := ParseWith(v, "pod-ns", ParseOptions{Compat: compat})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if len(res.Elements) > MaxSelections {
			t.Fatalf("%d elements", len(res.Elements))
		}
		for _, el := range res.Elements {
			if names.Label("ns", el.Namespace) != nil || names.Label("name", el.Name) != nil {
				t.Fatalf("invalid reference passed: %q", el.Ref())
			}
			if el.Interface != "" && names.Interface(el.Interface) != nil {
				t.Fatalf("invalid interface passed: %q", el.Interface)
			}
			if el.Compat != nil && !compat {
				t.Fatalf("compat keys accepted without compat: %+v", el.Compat)
			}
			if el.Compat != nil && len(el.Compat.DefaultRoute) > 2 {
				t.Fatalf("more than one gateway per family: %v", el.Compat.DefaultRoute)
			}
			for k := range el.Extensions {
				if !strings.Contains(k, ".") {
					t.Fatalf("reserved key %q reached extensions", k)
				}
			}
		}
	})
}
