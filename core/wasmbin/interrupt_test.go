package wasmbin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// module is a binary with one function of type () -> (), exported as "f",
// with the given body (locals declaration included).
func module(body ...byte) []byte {
	bin := []byte{
		0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type 0: () -> ()
		0x03, 0x02, 0x01, 0x00, // function 0 has type 0
		0x07, 0x05, 0x01, 0x01, 'f', 0x00, 0x00, // export "f"
	}
	code := AppendU32(AppendU32(nil, 1), uint32(len(body)))
	return AppendSection(bin, 10, append(code, body...))
}

var (
	endlessLoop     = module(0x00, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B) // loop br 0 end
	endlessTailCall = module(0x00, 0x12, 0x00, 0x0B)                   // return_call 0
)

// An endless loop and an endless tail call stop once the interrupt global
// is set; the instrumented modules are valid and export the global.
func TestInterruptStopsEndlessCode(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
	defer r.Close(ctx)
	for name, bin := range map[string][]byte{"loop": endlessLoop, "tail call": endlessTailCall} {
		t.Run(name, func(t *testing.T) {
			out, err := AddInterrupt(bin)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := r.Instantiate(ctx, out)
			if err != nil {
				if name == "tail call" && strings.Contains(err.Error(), "feature") {
					t.Skipf("this wazero refuses tail calls: %v", err)
				}
				t.Fatalf("instrumented module is invalid: %v", err)
			}
			defer mod.Close(ctx)
			g, ok := mod.ExportedGlobal(InterruptGlobal).(api.MutableGlobal)
			if !ok {
				t.Fatal("no mutable interrupt global exported")
			}
			g.Set(1) // set before the call: the code must stop at once
			if _, err := mod.ExportedFunction("f").Call(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("the endless code returned %v, want the interrupt's trap", err)
			}
		})
	}
}

func TestAddInterruptRefusesWhatItCannotRead(t *testing.T) {
	for name, bad := range map[string][]byte{
		"not wasm":         []byte("hello, world"),
		"truncated":        endlessLoop[:len(endlessLoop)-3],
		"unknown opcode":   module(0x00, 0xFD, 0x0C, 0x0B), // a SIMD instruction
		"section overruns": append(append([]byte{}, endlessLoop[:8]...), 0x01, 0x7F),
		"no exports":       AppendSection(append([]byte{}, endlessLoop[:8]...), 1, []byte{0}),
	} {
		if _, err := AddInterrupt(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v, want ErrFormat", name, err)
		}
	}
}

// A module that exports the interrupt global's name itself is refused: it
// would otherwise hand the host its own global to set.
func TestAddInterruptRefusesTheReservedExport(t *testing.T) {
	taken := []byte{
		0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00,
		0x06, 0x06, 0x01, 0x7F, 0x01, 0x41, 0x00, 0x0B, // a mutable i32 global
	}
	exp := AppendName(AppendU32(nil, 1), InterruptGlobal)
	taken = AppendSection(taken, 7, append(exp, 0x03, 0x00))
	if _, err := AddInterrupt(taken); err == nil || !strings.Contains(err.Error(), "reserves") {
		t.Fatalf("error %v, want the reserved name refused", err)
	}
}

// AddInterrupt never panics, and what it returns for a module wazero
// accepts, wazero accepts too.
func FuzzAddInterrupt(f *testing.F) {
	f.Add(endlessLoop)
	f.Add(endlessTailCall)
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := AddInterrupt(bin)
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
