// Package wasmfmt reads and writes the basic pieces of the WebAssembly
// binary format: LEB128 integers, names and sections. It is the one codec
// for them in plexus; it lives in the SDK module, which depends on
// nothing, so that the SDK's build tool and the host share it.
package wasmfmt

import (
	"errors"
	"fmt"
)

// Header is the magic number and version 1 that start every module.
const Header = "\x00asm\x01\x00\x00\x00"

// SectionCustom is the id of a custom section.
const SectionCustom = 0

// ErrMalformed is wrapped by every error about bytes that are not what the
// format says.
var ErrMalformed = errors.New("malformed Wasm")

// AppendU32 appends v in unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendS32 appends v in signed LEB128, as i32.const takes it.
func AppendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// ReadU32 reads the unsigned LEB128 number at b[i:] and returns it and
// where it ends. It takes at most five bytes and no value over 32 bits.
func ReadU32(b []byte, i int) (uint32, int, error) {
	var v uint64
	for shift := 0; shift < 35 && i < len(b); shift += 7 {
		c := b[i]
		i++
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			if v > 1<<32-1 {
				break
			}
			return uint32(v), i, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: bad LEB128 number", ErrMalformed)
}

// Skip returns where the LEB128 number at b[i:], of at most max bytes,
// ends; signed or unsigned alike.
func Skip(b []byte, i, max int) (int, error) {
	for n := 0; n < max && i < len(b); n++ {
		c := b[i]
		i++
		if c&0x80 == 0 {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: bad LEB128 number", ErrMalformed)
}

// AppendName appends a name: its length, then its bytes.
func AppendName(b []byte, s string) []byte {
	return append(AppendU32(b, uint32(len(s))), s...)
}

// AppendSection appends a section: its id, its size, then body.
func AppendSection(b []byte, id byte, body []byte) []byte {
	b = AppendU32(append(b, id), uint32(len(body)))
	return append(b, body...)
}

// AppendCustomSection appends a custom section: id 0, size, name, payload.
func AppendCustomSection(b []byte, name string, payload []byte) []byte {
	return AppendSection(b, SectionCustom, append(AppendName(nil, name), payload...))
}

// Section is one section of a module. Body aliases the module's bytes.
type Section struct {
	ID   byte
	Name string // a custom section's; its body still starts with it
	Body []byte
}

// Sections splits a module, after its header, into its sections. It
// checks sizes, not contents.
func Sections(module []byte) ([]Section, error) {
	if len(module) < len(Header) || string(module[:4]) != Header[:4] {
		return nil, fmt.Errorf("%w: no Wasm header", ErrMalformed)
	}
	var out []Section
	for i := len(Header); i < len(module); {
		id := module[i]
		n, next, err := ReadU32(module, i+1)
		if err != nil {
			return nil, fmt.Errorf("section at offset %d: %w", i, err)
		}
		end := uint64(next) + uint64(n)
		if end > uint64(len(module)) {
			return nil, fmt.Errorf("%w: section %d at offset %d runs past the end of the module", ErrMalformed, id, i)
		}
		s := Section{ID: id, Body: module[next:end]}
		if id == SectionCustom {
			l, j, err := ReadU32(s.Body, 0)
			if err != nil || uint64(j)+uint64(l) > uint64(len(s.Body)) {
				return nil, fmt.Errorf("%w: custom section at offset %d has a bad name", ErrMalformed, i)
			}
			s.Name = string(s.Body[j : j+int(l)])
		}
		out = append(out, s)
		i = int(end)
	}
	return out, nil
}

// Section ids of the sections plexus reads besides custom ones.
const (
	SectionImport = 2
	SectionExport = 7
)

// External kinds of imports and exports.
const (
	KindFunc   = 0
	KindTable  = 1
	KindMemory = 2
	KindGlobal = 3
)

// Import is one entry of the import section.
type Import struct {
	Module string `json:"module"`
	Name   string `json:"name"`
	Kind   byte   `json:"kind"`
}

// Export is one entry of the export section.
type Export struct {
	Name  string `json:"name"`
	Kind  byte   `json:"kind"`
	Index uint32 `json:"-"`
}

// Decoder reads bytes front to back; its first error sticks, and every
// read after it returns zero values.
type Decoder struct {
	buf []byte
	pos int
	err error
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err is the first error.
func (d *Decoder) Err() error { return d.err }

// Pos is how many bytes have been read.
func (d *Decoder) Pos() int { return d.pos }

func (d *Decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil || d.pos >= len(d.buf) {
		d.fail(fmt.Errorf("%w: unexpected end", ErrMalformed))
		return 0
	}
	c := d.buf[d.pos]
	d.pos++
	return c
}

// U32 reads an unsigned LEB128 number.
func (d *Decoder) U32() uint32 {
	if d.err != nil {
		return 0
	}
	v, next, err := ReadU32(d.buf, d.pos)
	if err != nil {
		d.fail(err)
		return 0
	}
	d.pos = next
	return v
}

// Bytes reads n bytes; the result aliases the decoder's input.
func (d *Decoder) Bytes(n uint32) []byte {
	if d.err != nil || uint64(d.pos)+uint64(n) > uint64(len(d.buf)) {
		d.fail(fmt.Errorf("%w: unexpected end", ErrMalformed))
		return nil
	}
	out := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return out
}

// Name reads a name.
func (d *Decoder) Name() string { return string(d.Bytes(d.U32())) }

// Rest returns the unread bytes; the result aliases the decoder's input.
func (d *Decoder) Rest() []byte {
	if d.err != nil {
		return nil
	}
	rest := d.buf[d.pos:]
	d.pos = len(d.buf)
	return rest
}

// limits skips a table's or a memory's limits: flags, min and, with
// bit 0, max.
func (d *Decoder) limits() {
	flags := d.Byte()
	d.U32()
	if flags&1 != 0 {
		d.U32()
	}
}

// Imports reads an import section's body.
func (d *Decoder) Imports() []Import {
	n := d.U32()
	var out []Import
	for i := uint32(0); i < n && d.err == nil; i++ {
		imp := Import{Module: d.Name(), Name: d.Name(), Kind: d.Byte()}
		switch imp.Kind {
		case KindFunc:
			d.U32() // type index
		case KindTable:
			d.Byte() // reference type
			d.limits()
		case KindMemory:
			d.limits()
		case KindGlobal:
			d.Byte() // value type
			d.Byte() // mutability
		default:
			d.fail(fmt.Errorf("%w: import %d has unknown kind %d", ErrMalformed, i, imp.Kind))
		}
		out = append(out, imp)
	}
	return out
}

// Exports reads an export section's body.
func (d *Decoder) Exports() []Export {
	n := d.U32()
	var out []Export
	for i := uint32(0); i < n && d.err == nil; i++ {
		out = append(out, Export{Name: d.Name(), Kind: d.Byte(), Index: d.U32()})
	}
	return out
}
