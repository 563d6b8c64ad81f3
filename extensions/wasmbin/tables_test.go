package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// tables is a module of an import section (if imports is not nil) and a
// table section of the given table types.
func tables(imports []byte, types ...[]byte) []byte {
	bin := []byte(wasmfmt.Header)
	if imports != nil {
		bin = wasmfmt.AppendSection(bin, wasmfmt.SectionImport, imports)
	}
	if types == nil {
		return bin
	}
	body := wasmfmt.AppendU32(nil, uint32(len(types)))
	for _, t := range types {
		body = append(body, t...)
	}
	return wasmfmt.AppendSection(bin, wasmfmt.SectionTable, body)
}

// funcref is a funcref table type: limits min and, with max >= 0, max.
func funcref(min uint32, max int64) []byte {
	return wasmfmt.AppendLimits([]byte{0x70}, wasmfmt.Limits{Min: min, Max: uint32(max), HasMax: max >= 0})
}

// BoundTables gives every table a maximum within the bound, shares the
// room left after the minimums among the tables, keeps a smaller maximum
// the module declares, and refuses minimums over the bound and imported
// tables, naming them.
func TestBoundTables(t *testing.T) {
	funcImport := append(wasmfmt.AppendName(wasmfmt.AppendName([]byte{1}, "wasi"), "f"), wasmfmt.KindFunc, 0)
	tableImport := append(wasmfmt.AppendName(wasmfmt.AppendName([]byte{1}, "env"), "t"), wasmfmt.KindTable, 0x70, 0, 0)
	// An initialized table: 0x40 0x00, funcref, limits, ref.null func.
	initialized := func(min uint32, max int64) []byte {
		return append(append([]byte{0x40, 0x00}, funcref(min, max)...), 0xd0, 0x70, 0x0b)
	}
	cases := []struct {
		name    string
		in, out []byte
		err     string
	}{
		{"no table", tables(funcImport), tables(funcImport), ""},
		{"Go's: no maximum", tables(nil, funcref(627, -1)), tables(nil, funcref(627, 1000)), ""},
		{"a larger maximum", tables(nil, funcref(10, 1<<32-1)), tables(nil, funcref(10, 1000)), ""},
		{"a smaller maximum kept", tables(nil, funcref(10, 20)), tables(nil, funcref(10, 20)), ""},
		{"minimum at the bound", tables(nil, funcref(1000, -1)), tables(nil, funcref(1000, 1000)), ""},
		{"room shared", tables(nil, funcref(100, -1), funcref(0, -1), funcref(300, 400)),
			tables(nil, funcref(100, 300), funcref(0, 200), funcref(300, 400)), ""},
		{"initializer kept", tables(nil, initialized(1, -1)), tables(nil, initialized(1, 1000)), ""},
		{"function import kept", tables(funcImport, funcref(1, -1)), tables(funcImport, funcref(1, 1000)), ""},
		{"minimum over the bound", tables(nil, funcref(1001, -1)), nil,
			"table bound exceeded: table 0 declares a minimum of 1001 entries, more than the 1000 entries allowed"},
		{"minimums over the bound", tables(nil, funcref(600, -1), funcref(401, 500)), nil,
			"table bound exceeded: tables declare minimums of 600 (table 0), 401 (table 1): 1001 entries in all, more than the 1000 entries allowed"},
		{"imported table", tables(tableImport), nil, "table bound exceeded: imports table env.t, whose growth the host cannot bound"},
		{"truncated table", tables(nil, []byte{0x70, 0x01, 0x05}), nil, "table section: malformed Wasm"},
		{"trailing bytes", tables(nil, append(funcref(1, -1), 0)), nil, "table section: 1 bytes left after its content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := BoundTables(c.in, 1000)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				if !errors.Is(err, ErrTableLimit) && !errors.Is(err, ErrFormat) {
					t.Fatalf("err = %v is neither ErrTableLimit nor ErrFormat", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.out) {
				t.Fatalf("got % x\nwant % x", got, c.out)
			}
			if err := wasmfmt.CheckLimits(got); err != nil {
				t.Fatalf("rewritten module: %v", err)
			}
		})
	}
}

// wazero takes the rewritten table and refuses a grow past its new
// maximum (-1) while taking one up to it.
func TestBoundTableGrowInWazero(t *testing.T) {
	ctx := context.Background()
	grow := func(delta byte) []byte {
		bin := []byte(wasmfmt.Header)
		bin = wasmfmt.AppendSection(bin, 1, []byte{1, 0x60, 0, 1, 0x7f}) // () -> i32
		bin = wasmfmt.AppendSection(bin, 3, []byte{1, 0})
		bin = wasmfmt.AppendSection(bin, 4, append([]byte{1}, funcref(1, -1)...))
		bin = wasmfmt.AppendSection(bin, 7, append(wasmfmt.AppendName([]byte{1}, "f"), 0, 0))
		body := []byte{0, 0xd0, 0x70, 0x41, delta, 0xfc, 0x0f, 0x00, 0x0b} // table.grow delta
		return wasmfmt.AppendSection(bin, 10, append([]byte{1, byte(len(body))}, body...))
	}
	for _, c := range []struct {
		delta byte
		want  uint32
	}{{9, 1}, {10, 1<<32 - 1}} {
		bin, err := BoundTables(grow(c.delta), 10)
		if err != nil {
			t.Fatal(err)
		}
		r := wazero.NewRuntime(ctx)
		mod, err := r.Instantiate(ctx, bin)
		if err != nil {
			t.Fatal(err)
		}
		res, err := mod.ExportedFunction("f").Call(ctx)
		if err != nil || uint32(res[0]) != c.want {
			t.Fatalf("grow by %d: %v %v, want %d", c.delta, res, err, c.want)
		}
		r.Close(ctx)
	}
}

// BoundTables never panics; for a module wazero accepts it refuses with
// ErrTableLimit or returns a module wazero accepts, within wasmfmt's
// limits, whose tables all declare maximums summing to at most the bound.
func FuzzBoundTables(f *testing.F) {
	f.Add(tables(nil, funcref(1, -1)), uint32(10))
	f.Add(tables(nil, funcref(3, -1), funcref(2, 4)), uint32(10))
	f.Add(endlessLoop, uint32(0))
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, bin []byte, bound uint32) {
		out, err := BoundTables(bin, bound)
		if wasmfmt.CheckLimits(bin) != nil {
			return
		}
		if _, cerr := r.CompileModule(ctx, bin); cerr != nil {
			return // not a valid module to begin with
		}
		if err != nil {
			if !errors.Is(err, ErrTableLimit) {
				t.Fatalf("a valid module refused: %v", err)
			}
			return
		}
		if err := wasmfmt.CheckLimits(out); err != nil {
			t.Fatalf("the bounded module is over the limits: %v", err)
		}
		if _, err := r.CompileModule(ctx, out); err != nil {
			t.Fatalf("a valid module became invalid: %v", err)
		}
		sections, _ := wasmfmt.Sections(out)
		for _, s := range sections {
			if s.ID != wasmfmt.SectionTable {
				continue
			}
			d := wasmfmt.NewDecoder(s.Body)
			var sum uint64
			for n := d.U32(); n > 0; n-- {
				_, lim, _ := d.TableType()
				if !lim.HasMax {
					t.Fatalf("a table without a maximum: %+v", lim)
				}
				sum += uint64(lim.Max)
			}
			if sum > uint64(bound) {
				t.Fatalf("maximums sum to %d, over the bound %d", sum, bound)
			}
		}
	})
}
