package extensions

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// A reader for the custom sections, imports and exports of a wasm binary,
// so that thin mode learns whether it needs a module from a few small
// reads instead of a compilation: code and data are skipped by offset.

// maxHeaderSection bounds what is read for one import/export/custom
// section; real modules have a few KiB there.
const maxHeaderSection = 4 << 20

// Import is one entry of the import section; Export one of the export
// section.
type (
	Import = wasmfmt.Import
	Export = wasmfmt.Export
)

// Binary is what plexus reads from a module without compiling it.
type Binary struct {
	// Manifests are the data of the custom sections named
	// abi.ManifestSection; a valid module has one.
	Manifests [][]byte
	Imports   []Import
	Exports   []Export
}

// ExportedFunc reports whether the module exports a function with the name.
func (b *Binary) ExportedFunc(name string) bool {
	return slices.ContainsFunc(b.Exports, func(e Export) bool { return e.Name == name && e.Kind == wasmfmt.KindFunc })
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
	length, end, err := wasmfmt.ReadU32(hdr[:n], 1)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("section at offset %d: bad size: %w", off, err)
	}
	body = off + int64(end)
	next = body + int64(length)
	if next > size {
		return 0, 0, 0, fmt.Errorf("section %d at offset %d runs past the end of the file", hdr[0], off)
	}
	return hdr[0], body, next, nil
}

func (b *Binary) readSection(r io.ReaderAt, id byte, off, length int64) error {
	if id != wasmfmt.SectionCustom && id != wasmfmt.SectionImport && id != wasmfmt.SectionExport {
		return nil
	}
	if length > maxHeaderSection {
		return fmt.Errorf("section %d is %d bytes, more than the %d plexus reads", id, length, maxHeaderSection)
	}
	buf := make([]byte, length)
	if _, err := r.ReadAt(buf, off); err != nil {
		return fmt.Errorf("reading section %d: %w", id, err)
	}
	d := wasmfmt.NewDecoder(buf)
	switch id {
	case wasmfmt.SectionCustom:
		if name, data := d.Name(), d.Rest(); name == abi.ManifestSection {
			b.Manifests = append(b.Manifests, data)
		}
	case wasmfmt.SectionImport:
		b.Imports = d.Imports()
	case wasmfmt.SectionExport:
		b.Exports = d.Exports()
	}
	if d.Err() != nil {
		return fmt.Errorf("section %d at offset %d: %w", id, off, d.Err())
	}
	return nil
}
