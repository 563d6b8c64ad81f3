package security

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestOversizedAnnotationsRefused: the selection annotation is capped in
// size (256 KiB, Kubernetes' own cap on all of a pod's annotations) and in
// elements (64), so a pod author cannot make plexus spend unbounded memory
// or run unbounded delegates. Strict: code 100 naming the limit; lenient:
// invalid and ignored (s4.1), default network only.
func TestOversizedAnnotationsRefused(t *testing.T) {
	cases := []struct{ name, ann, want string }{
		{"300 KiB", `[{"name":"net-a","com.example.pad":"` + strings.Repeat("x", 300<<10) + `"}]`, "exceeds the limit of 262144"},
		{"1000 selections text", strings.TrimSuffix(strings.Repeat("net-a,", 1000), ","), "1000 selections exceed the limit of 64"},
		{"1000 selections json", "[" + strings.TrimSuffix(strings.Repeat(`{"name":"net-a"},`, 1000), ",") + "]", "1000 selections exceed the limit of 64"},
	}
	for _, tc := range cases {
		eachStrictness(t, tc.name, tc.ann, func(t *testing.T, h *harness.World, c *harness.Container, strict bool) {
			before := harness.HostVeths(t)
			_, e := h.Plugin(c, "ADD")
			if !strict {
				if e != nil {
					t.Fatalf("lenient ADD: %+v", e)
				}
				assertDefaultOnly(t, h, c, before)
				return
			}
			harness.AssertCNIError(t, e, 100, "pod demo/web", tc.want)
			if len(e.Msg) > 1024 {
				t.Errorf("the error repeats the oversized input: %d bytes", len(e.Msg))
			}
			assertNothingAttached(t, h, c, before)
		})
	}
}

// TestOversizedNADConfigRefused: a NAD's delegate config is capped at
// 1 MiB (real ones are a few KiB); a 2 MiB one fails the ADD before any
// delegate runs (code 101), naming the NAD and the limit.
func TestOversizedNADConfigRefused(t *testing.T) {
	h := harness.New(t)
	var conf map[string]any
	harness.Must(t, json.Unmarshal([]byte(h.BridgeNADConfig("big")), &conf))
	conf["pad"] = strings.Repeat("x", 2<<20)
	b, err := json.Marshal(conf)
	harness.Must(t, err)
	h.NAD("demo", "big", string(b))
	h.Pod("demo", "web", "big")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	_, e := h.Plugin(c, "ADD")
	harness.AssertCNIError(t, e, 101, "pod demo/web", "demo/big", "over the limit of 1048576")
	if len(e.Msg) > 1024 {
		t.Errorf("the error repeats the oversized input: %d bytes", len(e.Msg))
	}
	assertNothingAttached(t, h, c, before)
}
