package wasmfmt

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// sec is one section of a test module.
type sec struct {
	id   byte
	body []byte
}

func mod(sections ...sec) []byte {
	m := []byte(Header)
	for _, s := range sections {
		m = AppendSection(m, s.id, s.body)
	}
	return m
}

// cat joins byte strings.
func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func b(bs ...byte) []byte { return bs }

// huge is the largest count: four billion entries in five bytes.
var huge = AppendU32(nil, 1<<32-1)

// code is a code section of bodies, each given without its size.
func code(bodies ...[]byte) []byte {
	out := AppendU32(nil, uint32(len(bodies)))
	for _, f := range bodies {
		out = append(AppendU32(out, uint32(len(f))), f...)
	}
	return out
}

// nameSection is a "name" custom section of one subsection.
func nameSection(id byte, sub []byte) sec {
	return sec{SectionCustom, cat(AppendName(nil, "name"), b(id), AppendU32(nil, uint32(len(sub))), sub)}
}

// Every vector claiming more entries than its section, body or subsection
// has bytes is refused, naming it and the count; so are locals over the
// limits.
func TestCheckLimitsRefuses(t *testing.T) {
	manyBodies := make([][]byte, MaxModuleLocals/MaxFunctionLocals+1)
	for i := range manyBodies {
		manyBodies[i] = cat(b(0x01), AppendU32(nil, MaxFunctionLocals), b(0x7F, 0x0B))
	}
	cases := []struct {
		name   string
		module []byte
		want   string
	}{
		{"types", mod(sec{SectionType, cat(huge, b(0x60, 0, 0))}), "type section at offset 8: malformed Wasm: 4294967295 types claimed in 3 bytes"},
		{"parameters", mod(sec{SectionType, cat(b(1, 0x60), huge, b(0x7F, 0))}), "4294967295 parameters claimed in 2 bytes"},
		{"results", mod(sec{SectionType, cat(b(1, 0x60, 0), huge)}), "4294967295 results claimed in 0 bytes"},
		{"recursive group", mod(sec{SectionType, cat(b(1, 0x4E), huge)}), "4294967295 types in a recursive group claimed in 0 bytes"},
		{"imports", mod(sec{SectionImport, huge}), "import section at offset 8: malformed Wasm: 4294967295 imports claimed in 0 bytes"},
		{"import module name", mod(sec{SectionImport, cat(b(1), huge, b('m'))}), "4294967295 import module bytes claimed in 1 bytes"},
		{"import name", mod(sec{SectionImport, cat(b(1, 1, 'm'), huge)}), "4294967295 import name bytes claimed in 0 bytes"},
		{"functions", mod(sec{SectionFunction, huge}), "function section at offset 8: malformed Wasm: 4294967295 functions claimed in 0 bytes"},
		{"tables", mod(sec{SectionTable, huge}), "4294967295 tables claimed in 0 bytes"},
		{"memories", mod(sec{SectionMemory, huge}), "4294967295 memories claimed in 0 bytes"},
		{"globals", mod(sec{SectionGlobal, huge}), "4294967295 globals claimed in 0 bytes"},
		{"exports", mod(sec{SectionExport, huge}), "4294967295 exports claimed in 0 bytes"},
		{"export name", mod(sec{SectionExport, cat(b(1), huge, b(0, 0))}), "4294967295 export name bytes claimed in 2 bytes"},
		{"element segments", mod(sec{SectionElement, huge}), "4294967295 element segments claimed in 0 bytes"},
		{"element functions", mod(sec{SectionElement, cat(b(1, 0, 0x41, 0, 0x0B), huge)}), "4294967295 element function indexes claimed in 0 bytes"},
		{"element expressions", mod(sec{SectionElement, cat(b(1, 5, 0x70), huge)}), "4294967295 element expressions claimed in 0 bytes"},
		{"function bodies", mod(sec{SectionCode, huge}), "code section at offset 8: malformed Wasm: 4294967295 function bodies claimed in 0 bytes"},
		{"local declarations", mod(sec{SectionCode, code(cat(huge, b(0x0B)))}), "function body 0: malformed Wasm: 4294967295 local declarations claimed in 1 bytes"},
		{"locals of a function", mod(sec{SectionCode, code(cat(b(1), huge, b(0x7F, 0x0B)))}),
			"code section at offset 8: module over plexus's Wasm limits: function body 0 declares 4294967295 locals, more than 50000"},
		{"locals of a function, in two declarations", mod(sec{SectionCode, code(cat(b(2), AppendU32(nil, 40000), b(0x7F), AppendU32(nil, 10001), b(0x7E, 0x0B)))}),
			"function body 0 declares 50001 locals, more than 50000"},
		{"locals of a module", mod(sec{SectionCode, code(manyBodies...)}), "function bodies up to 83 declare 4200000 locals in all, more than 4194304"},
		{"data segments", mod(sec{SectionData, huge}), "data section at offset 8: malformed Wasm: 4294967295 data segments claimed in 0 bytes"},
		{"data bytes", mod(sec{SectionData, cat(b(1, 1), huge)}), "4294967295 data bytes claimed in 0 bytes"},
		{"active data bytes", mod(sec{SectionData, cat(b(1, 0, 0x41, 0, 0x0B), huge, b(1))}), "4294967295 data bytes claimed in 1 bytes"},
		{"tags", mod(sec{SectionTag, huge}), "4294967295 tags claimed in 0 bytes"},
		{"module name", mod(nameSection(0, huge)), "name subsection 0: malformed Wasm: 4294967295 module name bytes claimed in 0 bytes"},
		{"function names", mod(nameSection(1, huge)), "custom section at offset 8: name subsection 1: malformed Wasm: 4294967295 function names claimed in 0 bytes"},
		{"functions' local names", mod(nameSection(2, huge)), "4294967295 functions' local names claimed in 0 bytes"},
		{"local names", mod(nameSection(2, cat(b(1, 0), huge))), "4294967295 local names claimed in 0 bytes"},
		{"name subsection longer than its content", mod(nameSection(1, b(0, 1, 1))), "name subsection 1: malformed Wasm: 2 bytes left after its content"},
		{"section longer than its content", mod(sec{SectionFunction, b(1, 0, 0)}), "function section at offset 8: malformed Wasm: 1 bytes left after the section's content"},
		{"entry past its section", mod(sec{SectionExport, b(1, 1, 'r')}, sec{SectionCode, b(0)}), "export section at offset 8: malformed Wasm: unexpected end"},
		{"section past the module", append([]byte(Header), SectionType, 0x05, 0x00), "type section at offset 8 runs past the end of the module"},
		{"not wasm", []byte("hello, world"), "no Wasm header"},
	}
	for _, c := range cases {
		err := CheckLimits(c.module)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v\nwant %q", c.name, err, c.want)
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrLimit) {
			t.Errorf("%s: err = %v, want ErrMalformed or ErrLimit", c.name, err)
		}
	}
}

// validModule uses every section and every encoding CheckLimits reads.
func validModule() []byte {
	types := cat(b(3, 0x60, 2, 0x7F, 0x64, 0x70, 1, 0x7E), // (i32, (ref func)) -> i64
		b(0x4E, 1, 0x60, 0, 0),    // rec group of () -> ()
		b(0x60, 0, 2, 0x7F, 0x7F)) // () -> (i32, i32)
	imports := cat(b(5),
		AppendName(AppendName(nil, "m"), "f"), b(KindFunc, 0),
		AppendName(AppendName(nil, "m"), "t"), b(KindTable, 0x6F, 1, 1, 2), // externref, min 1, max 2
		AppendName(AppendName(nil, "m"), "mem"), b(KindMemory, 0, 1),
		AppendName(AppendName(nil, "m"), "g"), b(KindGlobal, 0x63, 0x70, 0), // (ref null func), const
		AppendName(AppendName(nil, "m"), "tag"), b(kindTag, 0, 1))
	tables := b(2, 0x70, 0, 4, 0x40, 0, 0x70, 0, 1, 0xD0, 0x70, 0x0B) // plain, and with an initializer
	globals := cat(b(5),
		b(0x7F, 0, 0x41, 0x80, 0x01, 0x41, 2, 0x6A, 0x0B), // i32: 128 + 2, extended-const
		b(0x7E, 1, 0x42, 0x7F, 0x0B),
		b(0x7D, 0, 0x43, 0, 0, 0, 0, 0x0B),
		b(0x7C, 0, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0B),
		b(0x7B, 0, 0xFD, 0x0C), make([]byte, 16), b(0x0B)) // v128.const
	exports := cat(b(1), AppendName(nil, "run"), b(KindFunc, 1))
	elements := cat(b(8),
		b(0, 0x41, 0, 0x0B, 1, 1),
		b(1, 0, 1, 1),
		b(2, 1, 0x41, 0, 0x0B, 0, 1, 1),
		b(3, 0, 1, 1),
		b(4, 0x41, 0, 0x0B, 1, 0xD2, 1, 0x0B),
		b(5, 0x70, 2, 0xD2, 1, 0x0B, 0xD0, 0x70, 0x0B),
		b(6, 0, 0x23, 0, 0x0B, 0x64, 0x70, 1, 0xD2, 1, 0x0B),
		b(7, 0x70, 0))
	data := cat(b(3), b(0, 0x41, 0, 0x0B, 2, 'h', 'i'), b(1, 0), b(2, 0, 0x41, 8, 0x0B, 1, '!'))
	names := cat(b(0, 2, 1, 'm'), b(1, 4, 1, 1, 1, 'f'), b(2, 6, 1, 1, 1, 0, 1, 'x'), b(9, 1, 0xAA))
	return mod(
		sec{SectionType, types},
		sec{SectionImport, imports},
		sec{SectionFunction, b(1, 0)},
		sec{SectionTable, tables},
		sec{SectionMemory, b(1, 1, 1, 2)},
		sec{SectionTag, b(1, 0, 1)},
		sec{SectionGlobal, globals},
		sec{SectionExport, exports},
		sec{SectionStart, b(1)},
		sec{SectionElement, elements},
		sec{SectionDataCount, nil},
		sec{SectionCode, code(cat(b(2, 3, 0x7F), AppendU32(nil, MaxFunctionLocals-3), b(0x63, 0x70, 0x0B)))},
		sec{SectionData, data},
		sec{SectionCustom, cat(AppendName(nil, "name"), names)},
		sec{SectionCustom, AppendName(nil, "plexus.manifest")},
	)
}

func TestCheckLimitsTakesValidModules(t *testing.T) {
	for name, m := range map[string][]byte{
		"every section": validModule(),
		"header only":   []byte(Header),
		"empty vectors": mod(sec{SectionType, b(0)}, sec{SectionFunction, b(0)}, sec{SectionCode, b(0)}),
	} {
		if err := CheckLimits(m); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Refusing a module that claims billions of entries allocates next to
// nothing: nothing is allocated per entry, before or after reading it.
func TestCheckLimitsAllocatesLittle(t *testing.T) {
	for name, m := range map[string][]byte{
		"functions": mod(sec{SectionFunction, huge}),
		"locals":    mod(sec{SectionCode, code(cat(b(1), huge, b(0x7F, 0x0B)))}),
		"valid":     validModule(),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			_ = CheckLimits(m)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: 100 checks allocated %d KiB", name, n>>10)
		}
	}
}

// CheckLimits never panics, whatever the bytes, and takes every module
// it once took with a custom section appended (sections are independent).
func FuzzCheckLimits(f *testing.F) {
	f.Add(validModule())
	f.Add(mod(sec{SectionCode, code(cat(b(1), huge, b(0x7F, 0x0B)))}))
	f.Add(mod(nameSection(2, cat(b(1, 0), huge))))
	f.Fuzz(func(t *testing.T, m []byte) {
		if CheckLimits(m) != nil {
			return
		}
		if err := CheckLimits(AppendCustomSection(m, "x", nil)); err != nil {
			t.Fatalf("a custom section made a module fail: %v", err)
		}
	})
}

// TableType splits each encoding of a table type around its limits, and
// the parts with the limits re-encoded by AppendLimits are the input.
func TestTableTypeSplitsAroundLimits(t *testing.T) {
	cases := []struct {
		name       string
		in         []byte
		head, tail []byte
		lim        Limits
	}{
		{"funcref, min", []byte{0x70, 0x00, 0x80, 0x31}, []byte{0x70}, nil, Limits{Min: 6272}},
		{"externref, min and max", []byte{0x6f, 0x01, 0x02, 0x03}, []byte{0x6f}, nil, Limits{Flags: 1, Min: 2, Max: 3, HasMax: true}},
		{"(ref null func)", []byte{0x63, 0x70, 0x00, 0x05}, []byte{0x63, 0x70}, nil, Limits{Min: 5}},
		{"initialized", []byte{0x40, 0x00, 0x70, 0x00, 0x01, 0xd0, 0x70, 0x0b},
			[]byte{0x40, 0x00, 0x70}, []byte{0xd0, 0x70, 0x0b}, Limits{Min: 1}},
	}
	for _, c := range cases {
		d := NewDecoder(c.in)
		head, lim, tail := d.TableType()
		if d.Err() != nil || d.Len() != 0 {
			t.Fatalf("%s: err %v, %d bytes left", c.name, d.Err(), d.Len())
		}
		if string(head) != string(c.head) || string(tail) != string(c.tail) || lim != c.lim {
			t.Fatalf("%s: got % x %+v % x, want % x %+v % x", c.name, head, lim, tail, c.head, c.lim, c.tail)
		}
		if got := append(AppendLimits(append([]byte(nil), head...), lim), tail...); string(got) != string(c.in) {
			t.Fatalf("%s: re-encoded % x, want % x", c.name, got, c.in)
		}
	}
	d := NewDecoder([]byte{0x70, 0x01, 0x05})
	if head, _, tail := d.TableType(); d.Err() == nil || head != nil || tail != nil {
		t.Fatalf("a truncated table type: err %v", d.Err())
	}
	// AppendLimits sets the flag to match HasMax.
	if got := AppendLimits(nil, Limits{Min: 1, Max: 2, HasMax: true}); string(got) != "\x01\x01\x02" {
		t.Fatalf("AppendLimits = % x", got)
	}
}
