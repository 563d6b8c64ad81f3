// Package wasmbin rewrites WebAssembly binaries for plexus's extension
// host, adding a cheap deadline check and bounding tables' growth
// (tables.go), and creates the wazero runtimes that run them (runtime.go).
//
// wazero can stop a module when its context ends, but by calling out of
// the compiled code at every loop iteration (runtime.go). Code that never
// calls out is no better: Go cannot preempt it, so the garbage collector,
// and with it the process, waits for it. AddDeadlineCheck takes the middle
// way: every loop iteration and tail call counts down a counter, and every
// TickInterval of them the module calls TickModule.TickFunc, which returns
// to Go and traps once the call's context has ended. Code cannot run
// unboundedly without a loop or a tail call (recursion exhausts the
// stack), and the check is part of the module's code, out of its reach.
package wasmbin

import (
	"errors"
	"fmt"
	"slices"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// The function a checked module imports; a checked runtime (NewRuntime)
// provides it, with no parameters and no results.
const (
	TickModule = "plexus_deadline"
	TickFunc   = "tick"
)

// TickInterval is how many loop iterations and tail calls run between two
// calls of the tick: enough to make its cost vanish, few enough that the
// deadline and the collector wait for well under a millisecond.
const TickInterval = 1 << 14

// ErrFormat is wrapped by errors about binaries AddDeadlineCheck cannot
// rewrite: malformed, or using instructions it does not know.
var ErrFormat = errors.New("malformed or unsupported Wasm")

// formatError is an error of the format's codec (wasmfmt.ErrMalformed),
// which is an ErrFormat too.
type formatError struct{ error }

func (e formatError) Unwrap() error        { return e.error }
func (e formatError) Is(target error) bool { return target == ErrFormat }

// AddDeadlineCheck returns bin with the tick imported, a counter global
// added, and the countdown in every loop and before every tail call.
//
// The tick is appended to the imports, so every defined function moves up
// one index: calls, references, exports, the start function and element
// segments are renumbered. The "name" section, for debuggers, is dropped.
func AddDeadlineCheck(bin []byte) ([]byte, error) {
	sections, err := wasmfmt.Sections(bin)
	if err != nil {
		return nil, formatError{err}
	}
	sections = ensureSections(sections, wasmfmt.SectionType, wasmfmt.SectionImport, wasmfmt.SectionGlobal)
	r := &rewriter{}
	for _, s := range sections {
		var err error
		switch s.ID {
		case wasmfmt.SectionType:
			r.types, _, err = readU32(s.Body, 0)
		case wasmfmt.SectionImport:
			d := wasmfmt.NewDecoder(s.Body)
			for _, imp := range d.Imports() {
				switch imp.Kind {
				case wasmfmt.KindFunc:
					r.funcImports++
				case wasmfmt.KindGlobal:
					r.globalImports++
				}
			}
			if d.Err() != nil {
				err = formatError{d.Err()}
			}
		case wasmfmt.SectionGlobal:
			r.globals, _, err = readU32(s.Body, 0)
		}
		if err != nil {
			return nil, err
		}
	}
	r.tick = uint32(r.funcImports)
	r.counter = uint32(r.globalImports + r.globals)
	r.check = r.countdown()

	out := append([]byte{}, bin[:len(wasmfmt.Header)]...)
	for _, s := range sections {
		body, keep, err := r.section(s)
		if err != nil {
			return nil, err
		}
		if keep {
			out = wasmfmt.AppendSection(out, s.ID, body)
		}
	}
	return out, nil
}

// sectionOrder ranks the non-custom sections in the order a module must
// have them (the tag and data count sections are out of id order).
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// ensureSections adds, empty, each of ids the module lacks, in its place.
func ensureSections(sections []wasmfmt.Section, ids ...byte) []wasmfmt.Section {
	for _, id := range ids {
		if slices.ContainsFunc(sections, func(s wasmfmt.Section) bool { return s.ID == id }) {
			continue
		}
		at := slices.IndexFunc(sections, func(s wasmfmt.Section) bool {
			return s.ID != wasmfmt.SectionCustom && sectionOrder[s.ID] > sectionOrder[id]
		})
		if at < 0 {
			at = len(sections)
		}
		sections = slices.Insert(sections, at, wasmfmt.Section{ID: id, Body: []byte{0}})
	}
	return sections
}

// rewriter knows the module's index spaces and renumbers references to
// defined functions.
type rewriter struct {
	types, funcImports, globalImports, globals int
	tick, counter                              uint32
	check                                      []byte
}

// countdown is the code run at every loop iteration and tail call.
func (r *rewriter) countdown() []byte {
	c := wasmfmt.AppendU32([]byte{0x23}, r.counter)      // global.get counter
	c = append(c, 0x41, 0x01, 0x6B)                      // i32.const 1, i32.sub
	c = wasmfmt.AppendU32(append(c, 0x24), r.counter)    // global.set counter
	c = wasmfmt.AppendU32(append(c, 0x23), r.counter)    // global.get counter
	c = append(c, 0x45, 0x04, 0x40)                      // i32.eqz, if
	c = wasmfmt.AppendS32(append(c, 0x41), TickInterval) // i32.const interval
	c = wasmfmt.AppendU32(append(c, 0x24), r.counter)    // global.set counter
	c = wasmfmt.AppendU32(append(c, 0x10), r.tick)       // call tick
	return append(c, 0x0B)                               // end
}

// fn renumbers a function index.
func (r *rewriter) fn(x int) uint32 {
	if x >= r.funcImports {
		x++
	}
	return uint32(x)
}

func (r *rewriter) section(s wasmfmt.Section) (body []byte, keep bool, err error) {
	switch s.ID {
	case wasmfmt.SectionCustom:
		return s.Body, s.Name != "name", nil
	case wasmfmt.SectionType:
		body = appendToVector(s.Body, []byte{0x60, 0x00, 0x00}) // () -> ()
	case wasmfmt.SectionImport:
		imp := wasmfmt.AppendName(wasmfmt.AppendName(nil, TickModule), TickFunc)
		body = appendToVector(s.Body, wasmfmt.AppendU32(append(imp, 0x00), uint32(r.types)))
	case wasmfmt.SectionGlobal:
		if body, err = r.globalSection(s.Body); err == nil {
			counter := wasmfmt.AppendS32([]byte{0x7F, 0x01, 0x41}, TickInterval) // mutable i32
			body = appendToVector(body, append(counter, 0x0B))
		}
	case wasmfmt.SectionExport:
		body, err = r.exportSection(s.Body)
	case wasmfmt.SectionStart:
		var x int
		if x, _, err = readU32(s.Body, 0); err == nil {
			body = wasmfmt.AppendU32(nil, r.fn(x))
		}
	case wasmfmt.SectionElement:
		body, err = r.elementSection(s.Body)
	case wasmfmt.SectionCode:
		body, err = r.codeSection(s.Body)
	default:
		body = s.Body
	}
	return body, err == nil, err
}

// appendToVector adds one element to a section body that is a vector,
// whose count the caller has already read successfully.
func appendToVector(body, elem []byte) []byte {
	n, next, _ := readU32(body, 0)
	out := wasmfmt.AppendU32(nil, uint32(n+1))
	out = append(out, body[next:]...)
	return append(out, elem...)
}

// globalSection renumbers function references in the initializers.
func (r *rewriter) globalSection(body []byte) ([]byte, error) {
	out, _, err := vector(nil, body, 0, func(out []byte, i int) ([]byte, int, error) {
		if i+2 > len(body) {
			return nil, 0, fmt.Errorf("%w: global section ends early", ErrFormat)
		}
		return r.expr(append(out, body[i], body[i+1]), body, i+2) // valtype, mutability
	})
	return out, err
}

// vector copies the vector at i in body to out: its count, then each
// entry as entry copies it from where it starts, returning where it ends.
func vector(out, body []byte, i int, entry func(out []byte, i int) ([]byte, int, error)) ([]byte, int, error) {
	n, i, err := readU32(body, i)
	if err != nil {
		return nil, 0, err
	}
	out = wasmfmt.AppendU32(out, uint32(n))
	for range n {
		if out, i, err = entry(out, i); err != nil {
			return nil, 0, err
		}
	}
	return out, i, nil
}

func (r *rewriter) exportSection(body []byte) ([]byte, error) {
	d := wasmfmt.NewDecoder(body)
	exports := d.Exports()
	if d.Err() != nil {
		return nil, formatError{d.Err()}
	}
	out := wasmfmt.AppendU32(nil, uint32(len(exports)))
	for _, e := range exports {
		x := e.Index
		if e.Kind == wasmfmt.KindFunc {
			x = r.fn(int(x))
		}
		out = wasmfmt.AppendU32(append(wasmfmt.AppendName(out, e.Name), e.Kind), x)
	}
	return out, nil
}

// elementSection renumbers the functions of every element segment, in
// each of the eight encodings.
func (r *rewriter) elementSection(body []byte) ([]byte, error) {
	out, _, err := vector(nil, body, 0, func(out []byte, i int) ([]byte, int, error) {
		flags, i, err := readU32(body, i)
		if err != nil || flags > 7 {
			return nil, 0, fmt.Errorf("%w: element segment kind", ErrFormat)
		}
		out = wasmfmt.AppendU32(out, uint32(flags))
		if flags == 2 || flags == 6 { // an explicit table
			var table int
			if table, i, err = readU32(body, i); err != nil {
				return nil, 0, err
			}
			out = wasmfmt.AppendU32(out, uint32(table))
		}
		if flags&1 == 0 { // active: an offset
			if out, i, err = r.expr(out, body, i); err != nil {
				return nil, 0, err
			}
		}
		if flags&3 != 0 { // an element kind or reference type
			if i >= len(body) {
				return nil, 0, fmt.Errorf("%w: element segment ends early", ErrFormat)
			}
			out = append(out, body[i])
			i++
		}
		// The elements: function indices, or expressions.
		return vector(out, body, i, func(out []byte, i int) ([]byte, int, error) {
			if flags&4 != 0 {
				return r.expr(out, body, i)
			}
			x, i, err := readU32(body, i)
			return wasmfmt.AppendU32(out, r.fn(x)), i, err
		})
	})
	return out, err
}

// expr copies a constant expression, through its end.
func (r *rewriter) expr(out, b []byte, i int) ([]byte, int, error) {
	for {
		if i >= len(b) {
			return nil, 0, fmt.Errorf("%w: expression without end", ErrFormat)
		}
		op := b[i]
		var err error
		if out, i, err = r.instruction(out, b, i); err != nil {
			return nil, 0, err
		}
		if op == 0x0B {
			return out, i, nil
		}
	}
}

// codeSection rewrites every function body.
func (r *rewriter) codeSection(body []byte) ([]byte, error) {
	f := 0
	out, _, err := vector(nil, body, 0, func(out []byte, i int) ([]byte, int, error) {
		size, start, err := readU32(body, i)
		if err != nil || start+size > len(body) {
			return nil, 0, fmt.Errorf("%w: function %d body", ErrFormat, f)
		}
		fn, err := r.function(body[start : start+size])
		if err != nil {
			return nil, 0, fmt.Errorf("function %d: %w", f, err)
		}
		f++
		return append(wasmfmt.AppendU32(out, uint32(len(fn))), fn...), start + size, nil
	})
	return out, err
}

func (r *rewriter) function(fn []byte) ([]byte, error) {
	groups, i, err := readU32(fn, 0)
	if err != nil {
		return nil, err
	}
	for g := range groups { // local declarations: count, valtype
		if _, i, err = readU32(fn, i); err != nil {
			return nil, err
		}
		if i >= len(fn) {
			return nil, fmt.Errorf("%w: local declaration %d has no value type", ErrFormat, g)
		}
		i++
	}
	out := make([]byte, 0, len(fn)+len(fn)/32)
	out = append(out, fn[:i]...)
	for i < len(fn) {
		op := fn[i]
		if op == 0x12 || op == 0x13 { // return_call(_indirect): a loop without "loop"
			out = append(out, r.check...)
		}
		if out, i, err = r.instruction(out, fn, i); err != nil {
			return nil, err
		}
		if op == 0x03 { // loop: every iteration starts after its block type
			out = append(out, r.check...)
		}
	}
	return out, nil
}

// instruction copies the instruction at i, renumbering a function index.
func (r *rewriter) instruction(out, b []byte, i int) ([]byte, int, error) {
	next, err := skipInstruction(b, i)
	if err != nil {
		return nil, 0, err
	}
	switch b[i] {
	case 0x10, 0x12, 0xD2: // call, return_call, ref.func
		x, _, err := readU32(b, i+1)
		if err != nil {
			return nil, 0, err
		}
		return wasmfmt.AppendU32(append(out, b[i]), r.fn(x)), next, nil
	}
	return append(out, b[i:next]...), next, nil
}

// skipInstruction returns where the instruction at i ends. It knows the
// MVP instruction set and the sign-extension, saturating-truncation,
// bulk-memory, reference-type and multi-value additions; anything else is
// refused, and the extension host falls back to wazero's context check.
func skipInstruction(b []byte, i int) (int, error) {
	op := b[i]
	i++
	var err error
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		i, err = skipBlockType(b, i)
	case op == 0x0C || op == 0x0D || op == 0x10 || op == 0x12 || op == 0xD2 ||
		(op >= 0x20 && op <= 0x26): // br, br_if, call, return_call, ref.func, locals, globals, table.get/set
		_, i, err = readU32(b, i)
	case op == 0x0E: // br_table
		var n int
		if n, i, err = readU32(b, i); err == nil {
			for range n + 1 {
				if _, i, err = readU32(b, i); err != nil {
					break
				}
			}
		}
	case op == 0x11 || op == 0x13 || (op >= 0x28 && op <= 0x3E):
		// call_indirect, return_call_indirect: type, table; memory access: align, offset
		if _, i, err = readU32(b, i); err == nil {
			_, i, err = readU32(b, i)
		}
	case op == 0x1C: // select with types
		var n int
		n, i, err = readU32(b, i)
		i += n
	case op == 0x3F || op == 0x40 || op == 0xD0: // memory.size, memory.grow, ref.null
		i++
	case op == 0x41 || op == 0x42: // i32.const, i64.const
		i, err = skipLEB(b, i, 10)
	case op == 0x43:
		i += 4
	case op == 0x44:
		i += 8
	case op <= 0x01 || op == 0x05 || op == 0x0B || op == 0x0F || op == 0x1A || op == 0x1B ||
		(op >= 0x45 && op <= 0xC4) || op == 0xD1: // no immediates
	case op == 0xFC:
		i, err = skipPrefixed(b, i)
	default:
		err = fmt.Errorf("%w: unsupported opcode %#x", ErrFormat, op)
	}
	if err == nil && i > len(b) {
		err = fmt.Errorf("%w: instruction %#x ends past the function", ErrFormat, op)
	}
	return i, err
}

func skipBlockType(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: block type missing", ErrFormat)
	}
	switch b[i] {
	case 0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
		return i + 1, nil
	}
	return skipLEB(b, i, 5) // a type index (s33)
}

// skipPrefixed skips a 0xFC instruction: the sub-opcode, then its
// immediates.
func skipPrefixed(b []byte, i int) (int, error) {
	sub, i, err := readU32(b, i)
	if err != nil {
		return 0, err
	}
	switch {
	case sub <= 7: // saturating truncation
		return i, nil
	case sub == 8: // memory.init: data index, memory 0
		_, i, err = readU32(b, i)
		return i + 1, err
	case sub == 9 || sub == 13 || (sub >= 15 && sub <= 17): // data.drop, elem.drop, table.grow/size/fill
		_, i, err = readU32(b, i)
		return i, err
	case sub == 10: // memory.copy: two memory indexes
		return i + 2, nil
	case sub == 11: // memory.fill
		return i + 1, nil
	case sub == 12 || sub == 14: // table.init, table.copy
		if _, i, err = readU32(b, i); err == nil {
			_, i, err = readU32(b, i)
		}
		return i, err
	}
	return 0, fmt.Errorf("%w: unsupported opcode 0xfc %d", ErrFormat, sub)
}

// readU32 reads an index, count or size.
func readU32(b []byte, i int) (int, int, error) {
	v, next, err := wasmfmt.ReadU32(b, i)
	if err != nil {
		return 0, 0, formatError{err}
	}
	return int(v), next, nil
}

func skipLEB(b []byte, i, max int) (int, error) {
	next, err := wasmfmt.Skip(b, i, max)
	if err != nil {
		return 0, formatError{err}
	}
	return next, nil
}
