package wasmfmt

import (
	"errors"
	"fmt"
)

// Limits CheckLimits holds a module to. Engines have implementation
// limits of this kind; these are the WebAssembly JS API's (the ones
// browsers agree on) where it has one.
const (
	// MaxFunctionLocals bounds the locals one function body declares (the
	// JS API's limit, which counts parameters too, is 50,000). wazero's
	// own bound is 2^32, and it allocates them before reading the body.
	MaxFunctionLocals = 50000
	// MaxModuleLocals bounds the locals of all bodies together: a body of
	// seven bytes may declare MaxFunctionLocals, and wazero keeps a byte
	// per local of every function. A Go wasip1 module declares about
	// nine thousand in all (plexus's examples, 3.4 MB each).
	MaxModuleLocals = 1 << 22
)

// ErrLimit is wrapped by CheckLimits' errors about a module that is well
// formed as far as it read but over one of the limits above.
var ErrLimit = errors.New("module over plexus's Wasm limits")

// Section ids besides custom, import and export.
const (
	SectionType      = 1
	SectionFunction  = 3
	SectionTable     = 4
	SectionMemory    = 5
	SectionGlobal    = 6
	SectionStart     = 8
	SectionElement   = 9
	SectionCode      = 10
	SectionData      = 11
	SectionDataCount = 12
	SectionTag       = 13
)

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory",
	"global", "export", "start", "element", "code", "data", "data count", "tag"}

// SectionName is the name of a section id, for errors.
func SectionName(id byte) string {
	if int(id) < len(sectionNames) {
		return sectionNames[id]
	}
	return fmt.Sprintf("unknown (id %d)", id)
}

// CheckLimits reads a module's structure, not its instructions, before a
// Wasm engine compiles it: every vector must fit in the bytes left of its
// section or function body (each entry takes at least a byte), and the
// locals must stay within MaxFunctionLocals and MaxModuleLocals. wazero
// allocates a vector's entries before reading them, so without this a few
// bytes claiming four billion functions, locals or data bytes cost
// gigabytes before they are refused. It reads the encodings wazero reads
// (WebAssembly 2.0 and the proposals wazero decodes), so every module
// wazero accepts passes, and allocates nothing per entry.
func CheckLimits(module []byte) error {
	if len(module) < len(Header) || string(module[:4]) != Header[:4] {
		return fmt.Errorf("%w: no Wasm header", ErrMalformed)
	}
	c := &checker{}
	for i := len(Header); i < len(module); {
		id := module[i]
		n, next, err := ReadU32(module, i+1)
		if err != nil {
			return fmt.Errorf("section at offset %d: %w", i, err)
		}
		end := uint64(next) + uint64(n)
		if end > uint64(len(module)) {
			return fmt.Errorf("%w: %s section at offset %d runs past the end of the module", ErrMalformed, SectionName(id), i)
		}
		if err := c.section(id, module[next:end]); err != nil {
			return fmt.Errorf("%s section at offset %d: %w", SectionName(id), i, err)
		}
		i = int(end)
	}
	return nil
}

// checker keeps what CheckLimits counts across sections.
type checker struct{ locals uint64 }

func (c *checker) section(id byte, body []byte) error {
	d := NewDecoder(body)
	switch id {
	case SectionCustom:
		if string(d.Bytes(d.U32())) == "name" {
			d.nameSection()
		}
		d.Rest()
	case SectionType:
		d.vector("types", d.funcTypeOrGroup)
	case SectionImport:
		d.vector("imports", d.importEntry)
	case SectionFunction:
		d.vector("functions", func(uint32) { d.U32() })
	case SectionTable:
		d.vector("tables", func(uint32) { d.tableType() })
	case SectionMemory:
		d.vector("memories", func(uint32) { d.limits() })
	case SectionGlobal:
		d.vector("globals", func(uint32) { d.valType(); d.Byte(); d.constExpr() })
	case SectionExport:
		d.vector("exports", func(uint32) { d.name("export name bytes"); d.Byte(); d.U32() })
	case SectionStart:
		d.U32()
	case SectionDataCount:
		if len(body) > 0 { // wazero takes an empty one as zero
			d.U32()
		}
	case SectionElement:
		d.vector("element segments", d.elementSegment)
	case SectionCode:
		d.vector("function bodies", func(i uint32) { c.body(d, i) })
	case SectionData:
		d.vector("data segments", d.dataSegment)
	case SectionTag:
		d.vector("tags", func(uint32) { d.Byte(); d.U32() })
	default:
		return nil // wazero refuses it without reading it
	}
	if d.err == nil && d.pos != len(d.buf) {
		d.fail(fmt.Errorf("%w: %d bytes left after the section's content", ErrMalformed, len(d.buf)-d.pos))
	}
	return d.err
}

// body checks one function body's local declarations; wazero reads the
// instructions into one slice of the body's size.
func (c *checker) body(d *Decoder, i uint32) {
	fn := NewDecoder(d.Bytes(d.U32()))
	if d.err != nil {
		return
	}
	var locals uint64
	fn.vector("local declarations", func(uint32) {
		locals += uint64(fn.U32())
		fn.valType()
	})
	switch {
	case fn.err != nil:
		d.fail(fmt.Errorf("function body %d: %w", i, fn.err))
	case locals > MaxFunctionLocals:
		d.fail(fmt.Errorf("%w: function body %d declares %d locals, more than %d", ErrLimit, i, locals, MaxFunctionLocals))
	case c.locals+locals > MaxModuleLocals:
		d.fail(fmt.Errorf("%w: function bodies up to %d declare %d locals in all, more than %d", ErrLimit, i, c.locals+locals, MaxModuleLocals))
	}
	c.locals += locals
}

// Len is how many bytes are left to read.
func (d *Decoder) Len() int { return len(d.buf) - d.pos }

// Count reads a vector's length, which must not exceed the bytes left:
// every entry takes at least one.
func (d *Decoder) Count(what string) uint32 {
	n := d.U32()
	if d.err == nil && uint64(n) > uint64(d.Len()) {
		d.fail(fmt.Errorf("%w: %d %s claimed in %d bytes", ErrMalformed, n, what, d.Len()))
		return 0
	}
	return n
}

// vector reads a vector's length and calls entry for each entry until an
// error.
func (d *Decoder) vector(what string, entry func(i uint32)) {
	n := d.Count(what)
	for i := uint32(0); i < n && d.err == nil; i++ {
		entry(i)
	}
}

// name skips a name, whose length must fit; what names its bytes.
func (d *Decoder) name(what string) {
	d.Bytes(d.Count(what))
}

// valType skips a value type: one byte, or a reference type's prefix and
// heap type.
func (d *Decoder) valType() {
	if b := d.Byte(); b == 0x63 || b == 0x64 { // (ref null ht), (ref ht)
		d.skipLEB(5) // s33
	}
}

func (d *Decoder) skipLEB(max int) {
	if d.err != nil {
		return
	}
	next, err := Skip(d.buf, d.pos, max)
	if err != nil {
		d.fail(err)
		return
	}
	d.pos = next
}

// funcTypeOrGroup skips a function type, or a recursive group of them.
func (d *Decoder) funcTypeOrGroup(uint32) {
	if d.err == nil && d.pos < len(d.buf) && d.buf[d.pos] == 0x4E { // rec
		d.Byte()
		d.vector("types in a recursive group", func(uint32) { d.funcType() })
		return
	}
	d.funcType()
}

func (d *Decoder) funcType() {
	if b := d.Byte(); d.err == nil && b != 0x60 {
		d.fail(fmt.Errorf("%w: function type starts with %#x", ErrMalformed, b))
	}
	d.vector("parameters", func(uint32) { d.valType() })
	d.vector("results", func(uint32) { d.valType() })
}

func (d *Decoder) importEntry(i uint32) {
	d.name("import module bytes")
	d.name("import name bytes")
	switch kind := d.Byte(); kind {
	case KindFunc:
		d.U32()
	case KindTable:
		d.tableType()
	case KindMemory:
		d.limits()
	case KindGlobal:
		d.valType()
		d.Byte()
	case kindTag:
		d.Byte()
		d.U32()
	default:
		d.fail(fmt.Errorf("%w: import %d has unknown kind %d", ErrMalformed, i, kind))
	}
}

const kindTag = 4

// tableType skips a table type.
func (d *Decoder) tableType() { d.TableType() }

// Limits are a table's or a memory's size limits.
type Limits struct {
	Flags  byte // bit 0: Max is present; bit 1: shared
	Min    uint32
	Max    uint32
	HasMax bool
}

// AppendLimits appends l: its flags, min and, with HasMax, max. It sets
// or clears the flags' bit 0 to match HasMax.
func AppendLimits(b []byte, l Limits) []byte {
	flags := l.Flags &^ 1
	if l.HasMax {
		flags |= 1
	}
	b = AppendU32(append(b, flags), l.Min)
	if l.HasMax {
		b = AppendU32(b, l.Max)
	}
	return b
}

// TableType reads a table type, with the initializer prefix wazero reads,
// and returns its limits and the bytes before them (prefix and reference
// type) and after them (initializer), which alias the decoder's input.
// Re-encoding head, the limits and tail gives a table type again.
func (d *Decoder) TableType() (head []byte, lim Limits, tail []byte) {
	start := d.pos
	init := d.err == nil && d.pos < len(d.buf) && d.buf[d.pos] == 0x40
	if init {
		d.Bytes(2) // 0x40 0x00
	}
	d.valType()
	mid := d.pos
	lim.Flags = d.Byte()
	lim.Min = d.U32()
	if lim.Flags&1 != 0 {
		lim.Max, lim.HasMax = d.U32(), true
	}
	end := d.pos
	if init {
		d.constExpr()
	}
	if d.err != nil {
		return nil, Limits{}, nil
	}
	return d.buf[start:mid], lim, d.buf[end:d.pos]
}

// constExpr skips a constant expression through its end: the
// instructions wazero takes there (extended-const and SIMD included).
func (d *Decoder) constExpr() {
	for d.err == nil {
		switch op := d.Byte(); op {
		case 0x0B: // end
			return
		case 0x41: // i32.const
			d.skipLEB(5)
		case 0x42: // i64.const
			d.skipLEB(10)
		case 0x43: // f32.const
			d.Bytes(4)
		case 0x44: // f64.const
			d.Bytes(8)
		case 0x23, 0xD2: // global.get, ref.func
			d.U32()
		case 0xD0: // ref.null: a heap type
			d.skipLEB(5)
		case 0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E: // i32/i64 add, sub, mul
		case 0xFD: // v128.const
			if d.U32() != 12 && d.err == nil {
				d.fail(fmt.Errorf("%w: vector instruction in a constant expression", ErrMalformed))
			}
			d.Bytes(16)
		default:
			d.fail(fmt.Errorf("%w: opcode %#x in a constant expression", ErrMalformed, op))
		}
	}
}

// elementSegment skips one segment in any of its eight encodings.
func (d *Decoder) elementSegment(i uint32) {
	flags := d.U32()
	if d.err == nil && flags > 7 {
		d.fail(fmt.Errorf("%w: element segment %d has flags %d", ErrMalformed, i, flags))
		return
	}
	if flags&3 == 2 { // an explicit table
		d.U32()
	}
	if flags&1 == 0 { // active: an offset
		d.constExpr()
	}
	if flags&3 != 0 { // an element kind, or a reference type
		if flags&4 != 0 {
			d.valType()
		} else {
			d.Byte()
		}
	}
	if flags&4 != 0 {
		d.vector("element expressions", func(uint32) { d.constExpr() })
	} else {
		d.vector("element function indexes", func(uint32) { d.U32() })
	}
}

// dataSegment skips one segment; its bytes must fit.
func (d *Decoder) dataSegment(i uint32) {
	switch flags := d.U32(); flags {
	case 0:
		d.constExpr()
	case 1:
	case 2:
		d.U32()
		d.constExpr()
	default:
		d.fail(fmt.Errorf("%w: data segment %d has flags %d", ErrMalformed, i, flags))
	}
	d.Bytes(d.Count("data bytes"))
}

// nameSection checks the debugging names' vectors, which wazero decodes
// whenever the section is present. Each subsection must be exactly as long
// as it says: wazero reads on from where the content ends.
func (d *Decoder) nameSection() {
	for d.err == nil && d.Len() > 0 {
		id := d.Byte()
		sub := NewDecoder(d.Bytes(d.U32()))
		switch id {
		case 0: // module name
			sub.name("module name bytes")
		case 1: // function names
			sub.vector("function names", func(uint32) { sub.U32(); sub.name("function name bytes") })
		case 2: // local names
			sub.vector("functions' local names", func(uint32) {
				sub.U32()
				sub.vector("local names", func(uint32) { sub.U32(); sub.name("local name bytes") })
			})
		default:
			sub.Rest()
		}
		if sub.err == nil && sub.Len() != 0 {
			sub.fail(fmt.Errorf("%w: %d bytes left after its content", ErrMalformed, sub.Len()))
		}
		if sub.err != nil {
			d.fail(fmt.Errorf("name subsection %d: %w", id, sub.err))
		}
	}
}
