package wasmbin

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
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
	code := wasmfmt.AppendU32(wasmfmt.AppendU32(nil, 1), uint32(len(body)))
	return wasmfmt.AppendSection(bin, 10, append(code, body...))
}

var (
	endlessLoop     = module(0x00, 0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B) // loop br 0 end
	endlessTailCall = module(0x00, 0x12, 0x00, 0x0B)                   // return_call 0
)

// runtimeWithTick is a runtime whose tick traps once the call's context
// has ended, as the hosts' do; ticks counts its calls.
func runtimeWithTick(t *testing.T, ticks *int) wazero.Runtime {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2|experimental.CoreFeaturesTailCall))
	t.Cleanup(func() { r.Close(ctx) })
	_, err := r.NewHostModuleBuilder(TickModule).NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(ctx context.Context, _ []uint64) {
			*ticks++
			if err := ctx.Err(); err != nil {
				panic(err)
			}
		}), nil, nil).Export(TickFunc).Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An endless loop and an endless tail call end at their deadline, and
// the garbage collector can run meanwhile: the tick returns to Go.
func TestDeadlineStopsEndlessCode(t *testing.T) {
	for name, bin := range map[string][]byte{"loop": endlessLoop, "tail call": endlessTailCall} {
		t.Run(name, func(t *testing.T) {
			var ticks int
			r := runtimeWithTick(t, &ticks)
			out, err := AddDeadlineCheck(bin)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := r.Instantiate(context.Background(), out)
			if err != nil {
				t.Fatalf("checked module is invalid: %v", err)
			}
			gcDone := make(chan struct{})
			go func() {
				time.Sleep(20 * time.Millisecond)
				runtime.GC() // needs every goroutine at a safe point
				close(gcDone)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err = mod.ExportedFunction("f").Call(ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the endless code returned %v, want the deadline", err)
			}
			select {
			case <-gcDone:
			default:
				t.Fatal("a garbage collection did not finish while the module ran")
			}
			if ticks < 2 {
				t.Fatalf("%d ticks", ticks)
			}
		})
	}
}

// Functions move up one index for the imported tick: calls, exports, the
// table's elements and the start function still reach the same code.
func TestDeadlineCheckRenumbersFunctions(t *testing.T) {
	bin := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	bin = wasmfmt.AppendSection(bin, 1, []byte{0x02, 0x60, 0x00, 0x01, 0x7F, 0x60, 0x00, 0x00}) // t0: () -> i32, t1: () -> ()
	bin = wasmfmt.AppendSection(bin, 3, []byte{0x03, 0x00, 0x00, 0x01})                         // f0, f1: t0; f2: t1
	bin = wasmfmt.AppendSection(bin, 4, []byte{0x01, 0x70, 0x00, 0x01})                         // a funcref table
	bin = wasmfmt.AppendSection(bin, 6, []byte{0x01, 0x7F, 0x01, 0x41, 0x00, 0x0B})             // g0 = 0, set by start
	exports := wasmfmt.AppendU32(nil, 2)
	exports = append(wasmfmt.AppendName(exports, "f1"), 0x00, 0x01)
	exports = append(wasmfmt.AppendName(exports, "g"), 0x03, 0x00)
	bin = wasmfmt.AppendSection(bin, 7, exports)
	bin = wasmfmt.AppendSection(bin, 8, []byte{0x02})                                     // start: f2
	bin = wasmfmt.AppendSection(bin, 9, []byte{0x01, 0x00, 0x41, 0x00, 0x0B, 0x01, 0x00}) // table[0] = f0
	f0 := []byte{0x00, 0x41, 0x2A, 0x0B}                                                  // 42
	f1 := []byte{0x00, 0x10, 0x00, 0x41, 0x00, 0x11, 0x00, 0x00, 0x6A, 0x0B}              // f0() + table[0]()
	f2 := []byte{0x00, 0x41, 0x07, 0x24, 0x00, 0x0B}                                      // g0 = 7
	code := wasmfmt.AppendU32(nil, 3)
	for _, f := range [][]byte{f0, f1, f2} {
		code = append(wasmfmt.AppendU32(code, uint32(len(f))), f...)
	}
	bin = wasmfmt.AppendSection(bin, 10, code)

	out, err := AddDeadlineCheck(bin)
	if err != nil {
		t.Fatal(err)
	}
	var ticks int
	mod, err := runtimeWithTick(t, &ticks).Instantiate(context.Background(), out)
	if err != nil {
		t.Fatalf("checked module is invalid: %v", err)
	}
	if g := mod.ExportedGlobal("g").Get(); g != 7 {
		t.Fatalf("the start function did not run: g = %d", g)
	}
	res, err := mod.ExportedFunction("f1").Call(context.Background())
	if err != nil || res[0] != 84 {
		t.Fatalf("f1() = %v, %v; want 84", res, err)
	}
}

func TestDeadlineCheckRefusesWhatItCannotRead(t *testing.T) {
	for name, bad := range map[string][]byte{
		"not wasm":         []byte("hello, world"),
		"truncated":        endlessLoop[:len(endlessLoop)-3],
		"unknown opcode":   module(0x00, 0xFD, 0x0C, 0x0B), // a SIMD instruction
		"section overruns": append(append([]byte{}, endlessLoop[:8]...), 0x01, 0x7F),
	} {
		if _, err := AddDeadlineCheck(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v, want ErrFormat", name, err)
		}
	}
}

// AddDeadlineCheck never panics, and what it returns for a module wazero
// accepts, wazero accepts too and stays within wasmfmt's limits. Like the
// hosts, the target hands wazero only modules wasmfmt.CheckLimits passes:
// wazero allocates whatever a vector claims before reading it.
func FuzzAddDeadlineCheck(f *testing.F) {
	f.Add(endlessLoop)
	f.Add(endlessTailCall)
	f.Add(module(0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x7F, 0x0B)) // 2^32-1 locals: never reaches wazero
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, bin []byte) {
		out, err := AddDeadlineCheck(bin)
		if err != nil {
			return
		}
		if wasmfmt.CheckLimits(bin) != nil {
			return
		}
		if _, err := r.CompileModule(ctx, bin); err != nil {
			return // not a valid module to begin with
		}
		if err := wasmfmt.CheckLimits(out); err != nil {
			t.Fatalf("the checked module is over the limits: %v", err)
		}
		if _, err := r.CompileModule(ctx, out); err != nil {
			t.Fatalf("a valid module became invalid: %v", err)
		}
	})
}
