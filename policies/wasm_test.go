package policies

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
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

// The interrupt check goes into every loop of a module, and the result is
// a module wazero accepts, with the global exported.
func TestAddInterrupt(t *testing.T) {
	ctx := context.Background()
	loop := []byte{
		0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
		0x03, 0x02, 0x01, 0x00, // one function of type 0
		0x07, 0x05, 0x01, 0x01, 'f', 0x00, 0x00, // export "f"
		0x0A, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B, // f: loop br 0 end end
	}
	bin, err := addInterrupt(loop)
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, bin)
	if err != nil {
		t.Fatalf("instrumented module is invalid: %v", err)
	}
	g := mod.ExportedGlobal(interruptGlobal)
	if g == nil {
		t.Fatal("no interrupt global exported")
	}
	g.(interface{ Set(uint64) }).Set(1) // set before the call: the loop must stop at once
	if _, err := mod.ExportedFunction("f").Call(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("the endless loop returned %v, want the interrupt's trap", err)
	}
	for name, bad := range map[string][]byte{
		"not wasm":         []byte("hello, world"),
		"truncated":        loop[:len(loop)-3],
		"unknown opcode":   append(append([]byte{}, loop[:len(loop)-7]...), 0x07, 0x00, 0xFD, 0x0C, 0x00, 0x0B, 0x0B),
		"section overruns": append(append([]byte{}, loop[:8]...), 0x01, 0x7F),
	} {
		if _, err := addInterrupt(bad); !errors.Is(err, errWasmFormat) {
			t.Errorf("%s: error %v, want a malformed-Wasm error", name, err)
		}
	}
}

// addInterrupt never panics on bytes that are not a module it understands,
// and what it returns for a module wazero accepts, wazero accepts too.
func FuzzAddInterrupt(f *testing.F) {
	f.Add(envModule(1, 2))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x07\x05\x01\x01f\x00\x00\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b"))
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := addInterrupt(bin)
		if err != nil {
			return
		}
		if _, err := r.CompileModule(ctx, bin); err != nil {
			return // not a valid module to begin with
		}
		if _, err := r.CompileModule(ctx, out); err != nil {
			t.Fatalf("a valid module became invalid: %v", err)
		}
	})
}
