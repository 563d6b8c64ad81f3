package policies

import (
	"context"
	"strings"
	"testing"
)

// "auto" uses wasm where the policy allows it and says why not elsewhere;
// asking for wasm where it cannot run is a load error naming the reason.
func TestEvaluatorChoice(t *testing.T) {
	tests := []struct {
		name, policy, query string
		wantAuto, wantWhy   string
	}{
		{name: "the library compiles to wasm", wantAuto: EvaluatorWasm},
		{
			name:     "a query that is no data reference stays on topdown",
			policy:   decisionPolicy(`{"allowed": true, "reasons": []}`),
			query:    "x := data.plexus.authz.decision",
			wantAuto: EvaluatorTopdown, wantWhy: "not a plain data reference",
		},
		{
			name: "with stays on topdown",
			policy: decisionPolicy(`{"allowed": true, "reasons": []} if {
	a with input.pod.name as "x"
}

a if input.pod.name == "x"`),
			wantAuto: EvaluatorTopdown, wantWhy: `uses "with"`,
		},
		{
			name:     "a built-in with several values stays on topdown",
			policy:   decisionPolicy(`{"allowed": count([p | walk(input.pod, [p, _])]) > 0, "reasons": []}`),
			wantAuto: EvaluatorTopdown, wantWhy: "walk produces several values",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			paths := []string{libraryDir, "testdata/config-all.yaml"}
			if tc.policy != "" {
				paths = []string{writeFiles(t, map[string]string{"p.rego": tc.policy})}
			}
			e := newEngine(t, Config{Paths: paths, Query: tc.query, Evaluator: EvaluatorAuto})
			got, why := e.Evaluator()
			if got != tc.wantAuto || !strings.Contains(why, tc.wantWhy) {
				t.Fatalf("auto chose %s (%q), want %s (%q)", got, why, tc.wantAuto, tc.wantWhy)
			}
			if d, _ := e.Authorize(context.Background(), newRequest(t, "blue")); tc.query == "" && !d.Allowed {
				t.Fatalf("%s denied: %+v", got, d)
			}
			_, err := New(context.Background(), Config{Paths: paths, Query: tc.query, Evaluator: EvaluatorWasm})
			if (err != nil) != (tc.wantAuto == EvaluatorTopdown) || (err != nil && !strings.Contains(err.Error(), tc.wantWhy)) {
				t.Fatalf("evaluator wasm: error %v, want one mentioning %q only when auto falls back", err, tc.wantWhy)
			}
		})
	}
}

// A policy that needs more memory than an instance may have fails to
// decide, which denies; the next decision runs on a fresh instance.
func TestWasmMemoryLimitDenies(t *testing.T) {
	src := decisionPolicy(`{"allowed": count(numbers.range(1, 50000000)) > 0, "reasons": []}`)
	e := newEngine(t, Config{Paths: []string{writeFiles(t, map[string]string{"p.rego": src})}, Evaluator: EvaluatorWasm})
	for range 2 {
		d, err := e.Authorize(context.Background(), newRequest(t, "blue"))
		if err != nil {
			t.Fatal(err)
		}
		assertDenied(t, d, CodeError, "opa_malloc")
	}
}
