// Package extensions runs vendor extensions, WebAssembly modules that own
// reverse-domain keys of the selection annotation (s4.1.2.1) and of the
// status annotation (s5.3), in a wazero sandbox, as the prepare and enrich
// stages of core/pipeline. sdk/ABI.md is the contract; sdk/abi holds the
// names and documents both sides use.
package extensions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// hostFuncs are the functions of the "plexus" host module.
var hostFuncs = map[string]bool{"input_read": true, "output_write": true}

// wasiFuncs is the WASI preview1 allow-list. It is what the Go runtime and
// the standard library may import; with no preopens, files fail with EBADF.
// The sock_* functions are left out: a module has no business with sockets.
var wasiFuncs = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true, "random_get": true,
	"poll_oneoff": true, "proc_exit": true, "sched_yield": true,
	"fd_advise": true, "fd_allocate": true, "fd_close": true, "fd_datasync": true,
	"fd_fdstat_get": true, "fd_fdstat_set_flags": true, "fd_filestat_get": true,
	"fd_filestat_set_size": true, "fd_filestat_set_times": true, "fd_pread": true,
	"fd_prestat_get": true, "fd_prestat_dir_name": true, "fd_pwrite": true, "fd_read": true,
	"fd_readdir": true, "fd_renumber": true, "fd_seek": true, "fd_sync": true, "fd_tell": true,
	"fd_write": true, "path_create_directory": true, "path_filestat_get": true,
	"path_filestat_set_times": true, "path_link": true, "path_open": true,
	"path_readlink": true, "path_remove_directory": true, "path_rename": true,
	"path_symlink": true, "path_unlink_file": true,
}

// Manifest is a module's declaration, the JSON in its "plexus.manifest"
// custom section. Unknown fields are ignored.
type Manifest = abi.Manifest

// ParseManifest decodes and validates a declaration.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("invalid %s section: %w", abi.ManifestSection, err)
	}
	if m.ABI != abi.Version {
		return nil, fmt.Errorf("ABI version %d is not supported (this host speaks %d)", m.ABI, abi.Version)
	}
	if m.Name == "" || len(m.Name) > 63 || strings.Trim(m.Name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return nil, fmt.Errorf("name %q must be 1-63 characters of a-z, 0-9 and -", m.Name)
	}
	if len(m.Prefixes) == 0 {
		return nil, fmt.Errorf("module %q declares no key prefixes", m.Name)
	}
	for _, p := range m.Prefixes {
		if err := ValidPrefix(p); err != nil {
			return nil, fmt.Errorf("module %q: %w", m.Name, err)
		}
	}
	for i, a := range m.Prefixes {
		for _, b := range m.Prefixes[i+1:] {
			if prefixesOverlap(a, b) {
				return nil, fmt.Errorf("module %q: prefixes %q and %q overlap", m.Name, a, b)
			}
		}
	}
	for _, h := range m.Hooks {
		if h != abi.HookPrepare && h != abi.HookEnrich {
			return nil, fmt.Errorf("module %q: unknown hook %q", m.Name, h)
		}
	}
	return &m, nil
}

// ValidPrefix checks a declared prefix: reverse domain notation (s4.1.2.1,
// s5.3) of at least two lower-case DNS labels, the first (the top-level
// domain) letters only, optionally ending in ".". Keys without a period
// are reserved, so no prefix can own one.
func ValidPrefix(p string) error {
	// A trailing "." is only a reminder that the prefix owns the keys below it.
	labels := strings.Split(strings.TrimSuffix(p, "."), ".")
	if len(labels) < 2 {
		return fmt.Errorf("prefix %q is not reverse domain notation (want at least two labels, like \"com.example.\")", p)
	}
	for i, l := range labels {
		if names.Label("prefix label", l) != nil {
			return fmt.Errorf("prefix %q: label %q is not a lower-case DNS label", p, l)
		}
		if i == 0 && strings.ContainsAny(l, "0123456789-") {
			return fmt.Errorf("prefix %q: %q is not a top-level domain", p, l)
		}
	}
	return nil
}

// Owns reports whether prefix owns key. Ownership is by whole labels:
// "com.example." owns "com.example.vlan" and "com.example.a.b", not
// "com.examples.x"; "io.plexus.overrides" owns itself and the keys below it.
func Owns(prefix, key string) bool {
	base := strings.TrimSuffix(prefix, ".")
	return key == base || strings.HasPrefix(key, base+".")
}

// prefixesOverlap reports whether some key would be owned by both.
func prefixesOverlap(a, b string) bool {
	a, b = strings.TrimSuffix(a, "."), strings.TrimSuffix(b, ".")
	return Owns(a, b) || Owns(b, a)
}

// clash says how two modules clash: the same name, or a key both would own.
func clash(a, b *Manifest) error {
	if a.Name == b.Name {
		return fmt.Errorf("two modules are named %q", a.Name)
	}
	for _, pa := range a.Prefixes {
		for _, pb := range b.Prefixes {
			if prefixesOverlap(pa, pb) {
				return fmt.Errorf("module %q prefix %q overlaps module %q prefix %q", a.Name, pa, b.Name, pb)
			}
		}
	}
	return nil
}

// checkImports refuses anything but the ABI's host functions and the WASI
// allow-list, naming the first offending import.
func checkImports(imports []Import) error {
	for _, imp := range imports {
		if imp.Kind != wasmfmt.KindFunc {
			return fmt.Errorf("import %s.%s: only functions may be imported", imp.Module, imp.Name)
		}
		switch {
		case imp.Module == abi.HostModule && hostFuncs[imp.Name]:
		case imp.Module == abi.WASIModule && wasiFuncs[imp.Name]:
		default:
			return fmt.Errorf("import %s.%s is not allowed (only %s functions of ABI v%d and WASI preview1 without sockets)",
				imp.Module, imp.Name, abi.HostModule, abi.Version)
		}
	}
	return nil
}

// checkExports requires a reactor exporting every declared hook.
func checkExports(b *Binary, m *Manifest) error {
	if b.ExportedFunc("_start") {
		return fmt.Errorf("module exports _start: build it as a reactor (-buildmode=c-shared)")
	}
	for _, h := range m.Hooks {
		if !b.ExportedFunc(h) {
			return fmt.Errorf("declares hook %q but does not export it", h)
		}
	}
	return nil
}

// Declaration is a module's validated manifest and its imports and
// exports, read without compiling it.
type Declaration struct {
	Manifest
	Imports []Import `json:"imports"`
	Exports []Export `json:"exports"`
}

// declare reads the header sections of the wasm binary in r (size bytes)
// and validates them against the ABI.
func declare(r io.ReaderAt, size int64) (*Declaration, error) {
	b, err := ParseBinary(r, size)
	if err != nil {
		return nil, err
	}
	switch n := len(b.Manifests); {
	case n == 0:
		return nil, fmt.Errorf("missing declaration: no %q custom section", abi.ManifestSection)
	case n > 1:
		return nil, fmt.Errorf("missing declaration: %d %q custom sections, want one", n, abi.ManifestSection)
	}
	m, err := ParseManifest(b.Manifests[0])
	if err != nil {
		return nil, err
	}
	if err := checkImports(b.Imports); err != nil {
		return nil, fmt.Errorf("module %q: %w", m.Name, err)
	}
	if err := checkExports(b, m); err != nil {
		return nil, fmt.Errorf("module %q: %w", m.Name, err)
	}
	return &Declaration{Manifest: *m, Imports: b.Imports, Exports: b.Exports}, nil
}

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
