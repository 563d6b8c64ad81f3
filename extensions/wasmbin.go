package extensions

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// A tiny reader for the parts of a wasm binary plexus needs before it
// compiles anything: custom sections, imports and exports. Thin mode reads a
// module's declaration this way, so deciding whether a module is needed costs
// a few small reads instead of a compilation. Section bodies it does not need
// (code, data) are skipped by offset, never read.

const (
	sectionImport = 2
	sectionExport = 7

	// maxHeaderSection bounds what is read for one import/export/custom
	// section; real modules have a few KiB there.
	maxHeaderSection = 4 << 20
)

// External kinds of imports and exports.
const (
	kindFunc   = 0
	kindTable  = 1
	kindMemory = 2
	kindGlobal = 3
)

// Import is one entry of the import section.
type Import struct {
	Module string `json:"module"`
	Name   string `json:"name"`
	Kind   byte   `json:"kind"`
}

// Export is one entry of the export section.
type Export struct {
	Name string `json:"name"`
	Kind byte   `json:"kind"`
}

// CustomSection is a named custom section (id 0).
type CustomSection struct {
	Name string
	Data []byte
}

// Binary is what plexus reads from a module without compiling it.
type Binary struct {
	Custom  []CustomSection
	Imports []Import
	Exports []Export
}

// CustomNamed returns the data of the only custom section with the name, or an
// error when there is none or more than one.
func (b *Binary) CustomNamed(name string) ([]byte, error) {
	var found [][]byte
	for _, c := range b.Custom {
		if c.Name == name {
			found = append(found, c.Data)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no %q custom section", name)
	case 1:
		return found[0], nil
	default:
		return nil, fmt.Errorf("%d %q custom sections, want one", len(found), name)
	}
}

// ExportedFunc reports whether the module exports a function with the name.
func (b *Binary) ExportedFunc(name string) bool {
	for _, e := range b.Exports {
		if e.Name == name && e.Kind == kindFunc {
			return true
		}
	}
	return false
}

// ParseBinary reads the header sections of the wasm binary in r (size bytes).
func ParseBinary(r io.ReaderAt, size int64) (*Binary, error) {
	head := make([]byte, 8)
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, fmt.Errorf("reading wasm header: %w", err)
	}
	if string(head[:4]) != wasmfmt.Header[:4] {
		return nil, errors.New("not a wasm binary (bad magic)")
	}
	if string(head[4:]) != wasmfmt.Header[4:] {
		return nil, errors.New("unsupported wasm binary version")
	}
	b := &Binary{}
	for off := int64(8); off < size; {
		id, body, next, err := sectionAt(r, off, size)
		if err != nil {
			return nil, err
		}
		if err := b.readSection(r, id, body, next-body); err != nil {
			return nil, err
		}
		off = next
	}
	return b, nil
}

// sectionAt reads the header of the section at off: its id, where its body
// starts and where the next section starts.
func sectionAt(r io.ReaderAt, off, size int64) (id byte, body, next int64, err error) {
	hdr := make([]byte, 6)
	n, err := r.ReadAt(hdr, off)
	if n < 2 && err != nil {
		return 0, 0, 0, fmt.Errorf("section at offset %d: %w", off, err)
	}
	d := decoder{buf: hdr[1:n]}
	length := d.u32()
	if d.err != nil {
		return 0, 0, 0, fmt.Errorf("section at offset %d: bad size: %w", off, d.err)
	}
	body = off + 1 + int64(d.pos)
	next = body + int64(length)
	if next > size {
		return 0, 0, 0, fmt.Errorf("section %d at offset %d runs past the end of the file", hdr[0], off)
	}
	return hdr[0], body, next, nil
}

func (b *Binary) readSection(r io.ReaderAt, id byte, off, length int64) error {
	if id != wasmfmt.SectionCustom && id != sectionImport && id != sectionExport {
		return nil
	}
	if length > maxHeaderSection {
		return fmt.Errorf("section %d is %d bytes, more than the %d plexus reads", id, length, maxHeaderSection)
	}
	buf := make([]byte, length)
	if _, err := r.ReadAt(buf, off); err != nil {
		return fmt.Errorf("reading section %d: %w", id, err)
	}
	d := &decoder{buf: buf}
	switch id {
	case wasmfmt.SectionCustom:
		name := d.name()
		b.Custom = append(b.Custom, CustomSection{Name: name, Data: d.rest()})
	case sectionImport:
		b.Imports = d.imports()
	case sectionExport:
		b.Exports = d.exports()
	}
	if d.err != nil {
		return fmt.Errorf("section %d at offset %d: %w", id, off, d.err)
	}
	return nil
}

// decoder reads integers, bytes and names; the first error sticks.
type decoder struct {
	buf []byte
	pos int
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || d.pos >= len(d.buf) {
		d.fail(errors.New("unexpected end of section"))
		return 0
	}
	c := d.buf[d.pos]
	d.pos++
	return c
}

func (d *decoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	v, next, err := wasmfmt.ReadU32(d.buf, d.pos)
	if err != nil {
		d.fail(err)
		return 0
	}
	d.pos = next
	return v
}

func (d *decoder) bytes(n uint32) []byte {
	if d.err != nil || uint64(d.pos)+uint64(n) > uint64(len(d.buf)) {
		d.fail(errors.New("unexpected end of section"))
		return nil
	}
	out := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return out
}

func (d *decoder) name() string { return string(d.bytes(d.u32())) }

func (d *decoder) rest() []byte {
	if d.err != nil {
		return nil
	}
	return bytes.Clone(d.buf[d.pos:])
}

// limits skips a table or memory limits: flags, min and, with bit 0, max.
func (d *decoder) limits() {
	flags := d.byte()
	d.u32()
	if flags&1 != 0 {
		d.u32()
	}
}

func (d *decoder) imports() []Import {
	n := d.u32()
	var out []Import
	for i := uint32(0); i < n && d.err == nil; i++ {
		imp := Import{Module: d.name(), Name: d.name(), Kind: d.byte()}
		switch imp.Kind {
		case kindFunc:
			d.u32() // type index
		case kindTable:
			d.byte() // reference type
			d.limits()
		case kindMemory:
			d.limits()
		case kindGlobal:
			d.byte() // value type
			d.byte() // mutability
		default:
			d.fail(fmt.Errorf("import %d has unknown kind %d", i, imp.Kind))
		}
		out = append(out, imp)
	}
	return out
}

func (d *decoder) exports() []Export {
	n := d.u32()
	var out []Export
	for i := uint32(0); i < n && d.err == nil; i++ {
		e := Export{Name: d.name(), Kind: d.byte()}
		d.u32() // index
		out = append(out, e)
	}
	return out
}
