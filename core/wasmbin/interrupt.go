// Package wasmbin rewrites WebAssembly binaries for plexus's hosts (the
// policy evaluator and the extension host): it adds an interrupt check, so
// that a call can be stopped at its deadline cheaply.
//
// wazero can stop a module when its context ends, but it does so by calling
// out of the compiled code at every loop iteration, which made a policy
// decision four times slower and an extension hook three times. AddInterrupt
// instead gives the module an exported mutable i32 global, InterruptGlobal,
// and makes every loop iteration and every tail call read it and trap when
// it is not zero: a load and a branch. The host sets it when the call's
// context ends. Code cannot run unboundedly without a loop or a tail call
// (plain recursion exhausts the stack), and the check is in the module's
// own code, out of its reach.
package wasmbin

import (
	"errors"
	"fmt"
)

// InterruptGlobal is the exported global that stops the module's code.
const InterruptGlobal = "plexus_interrupt"

// Wasm section ids and the bytes addInterrupt writes.
const (
	secImport = 2
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

// ErrFormat is wrapped by errors about binaries AddInterrupt cannot
// rewrite: malformed, or using instructions it does not know.
var ErrFormat = errors.New("malformed or unsupported Wasm")

// interruptEntry declares the interrupt global: a mutable i32, initially 0.
var interruptEntry = []byte{0x7F, 0x01, 0x41, 0x00, 0x0B}

// AddInterrupt returns bin with the interrupt global and checks added.
func AddInterrupt(bin []byte) ([]byte, error) {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: no Wasm header", ErrFormat)
	}
	sections, err := splitSections(bin[8:])
	if err != nil {
		return nil, err
	}
	importedGlobals, globals := 0, 0
	for _, s := range sections {
		switch s.id {
		case secImport:
			if importedGlobals, err = countImportedGlobals(s.body); err != nil {
				return nil, err
			}
		case secGlobal:
			if globals, _, err = readU32(s.body, 0); err != nil {
				return nil, err
			}
		}
	}
	idx := uint32(importedGlobals + globals)
	check := AppendU32([]byte{0x23}, idx)         // global.get idx
	check = append(check, 0x04, 0x40, 0x00, 0x0B) // if (no result) unreachable end

	out := append([]byte{}, bin[:8]...)
	added := false
	for _, s := range sections {
		body := s.body
		switch {
		case s.id == secGlobal:
			body = appendToVector(body, interruptEntry)
			added = true
		case s.id == secExport:
			if err := checkExportFree(body); err != nil {
				return nil, err
			}
			if !added { // no global section: it goes before the exports
				out = AppendSection(out, secGlobal, appendToVector([]byte{0}, interruptEntry))
				added = true
			}
			body = appendToVector(body, append(AppendName(nil, InterruptGlobal), append([]byte{0x03}, AppendU32(nil, idx)...)...))
		case s.id == secCode:
			if body, err = instrumentCode(body, check); err != nil {
				return nil, err
			}
		}
		out = AppendSection(out, s.id, body)
	}
	if !added {
		return nil, fmt.Errorf("%w: the module has no exports", ErrFormat)
	}
	return out, nil
}

// checkExportFree refuses a module that exports InterruptGlobal itself.
func checkExportFree(body []byte) error {
	n, i, err := readU32(body, 0)
	if err != nil {
		return err
	}
	for range n {
		var l int
		if l, i, err = readU32(body, i); err != nil || i+l > len(body) {
			return fmt.Errorf("%w: export section", ErrFormat)
		}
		if string(body[i:i+l]) == InterruptGlobal {
			return fmt.Errorf("the module exports %q itself, a name the host reserves", InterruptGlobal)
		}
		i += l + 1 // the name, then the kind
		if _, i, err = readU32(body, i); err != nil {
			return err
		}
	}
	return nil
}

type section struct {
	id   byte
	body []byte
}

func splitSections(b []byte) ([]section, error) {
	var out []section
	for i := 0; i < len(b); {
		id := b[i]
		n, next, err := readU32(b, i+1)
		if err != nil {
			return nil, err
		}
		if next+n > len(b) {
			return nil, fmt.Errorf("%w: section %d overruns the module", ErrFormat, id)
		}
		out = append(out, section{id: id, body: b[next : next+n]})
		i = next + n
	}
	return out, nil
}

// appendToVector adds one element to a section body that is a vector,
// whose count the caller has already read successfully.
func appendToVector(body, elem []byte) []byte {
	n, next, _ := readU32(body, 0)
	out := AppendU32(nil, uint32(n+1))
	out = append(out, body[next:]...)
	return append(out, elem...)
}

func countImportedGlobals(body []byte) (int, error) {
	n, i, err := readU32(body, 0)
	if err != nil {
		return 0, err
	}
	globals := 0
	for range n {
		for range 2 { // module and field names
			var l int
			if l, i, err = readU32(body, i); err != nil {
				return 0, err
			}
			i += l
		}
		if i >= len(body) {
			return 0, fmt.Errorf("%w: import section ends early", ErrFormat)
		}
		kind := body[i]
		i++
		switch kind {
		case 0x00: // function: type index
			_, i, err = readU32(body, i)
		case 0x01: // table: reftype, limits
			i, err = skipLimits(body, i+1)
		case 0x02: // memory: limits
			i, err = skipLimits(body, i)
		case 0x03: // global: valtype, mutability
			globals++
			i += 2
		default:
			err = fmt.Errorf("%w: import kind %#x", ErrFormat, kind)
		}
		if err != nil {
			return 0, err
		}
	}
	return globals, nil
}

func skipLimits(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: limits end early", ErrFormat)
	}
	flags := b[i]
	_, i, err := readU32(b, i+1)
	if err == nil && flags&1 != 0 {
		_, i, err = readU32(b, i)
	}
	return i, err
}

// instrumentCode inserts check after the block type of every loop.
func instrumentCode(body, check []byte) ([]byte, error) {
	n, i, err := readU32(body, 0)
	if err != nil {
		return nil, err
	}
	out := AppendU32(nil, uint32(n))
	for f := range n {
		size, start, err := readU32(body, i)
		if err != nil || start+size > len(body) {
			return nil, fmt.Errorf("%w: function %d body", ErrFormat, f)
		}
		fn, err := instrumentFunction(body[start:start+size], check)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", f, err)
		}
		out = AppendU32(out, uint32(len(fn)))
		out = append(out, fn...)
		i = start + size
	}
	return out, nil
}

func instrumentFunction(fn, check []byte) ([]byte, error) {
	groups, i, err := readU32(fn, 0)
	if err != nil {
		return nil, err
	}
	for range groups { // local declarations: count, valtype
		if _, i, err = readU32(fn, i); err != nil {
			return nil, err
		}
		i++
	}
	out := make([]byte, 0, len(fn)+len(fn)/64)
	copied := 0 // fn[:copied] is in out
	for i < len(fn) {
		op := fn[i]
		next, err := skipInstruction(fn, i)
		if err != nil {
			return nil, err
		}
		switch op {
		case 0x03: // loop: every iteration starts after its block type
			out = append(append(out, fn[copied:next]...), check...)
			copied = next
		case 0x12, 0x13: // return_call(_indirect): a loop without "loop"
			out = append(append(out, fn[copied:i]...), check...)
			copied = i
		}
		i = next
	}
	return append(out, fn[copied:]...), nil
}

// skipInstruction returns where the instruction at i ends. It knows the
// MVP instruction set and the sign-extension, saturating-truncation,
// bulk-memory, reference-type and multi-value additions, which is what
// OPA's Wasm compiler emits; anything else is refused, and "auto" falls
// back to the topdown evaluator.
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
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		if _, i, err = readU32(b, i); err == nil {
			_, i, err = readU32(b, i)
		}
	case op == 0x1C: // select with types
		var n int
		n, i, err = readU32(b, i)
		i += n
	case op >= 0x28 && op <= 0x3E: // memory access: align, offset
		if _, i, err = readU32(b, i); err == nil {
			_, i, err = readU32(b, i)
		}
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

func readU32(b []byte, i int) (int, int, error) {
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		if i >= len(b) {
			break
		}
		c := b[i]
		i++
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			if v > 1<<32-1 {
				break
			}
			return int(v), i, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: bad LEB128 number", ErrFormat)
}

func skipLEB(b []byte, i, max int) (int, error) {
	for n := 0; n < max && i < len(b); n++ {
		c := b[i]
		i++
		if c&0x80 == 0 {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: bad LEB128 number", ErrFormat)
}
