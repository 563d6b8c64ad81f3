package extensions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// fakeWasm describes a hand-assembled module: enough wasm to test what the
// Go toolchain will not produce (traps on purpose, stray imports, bad or
// missing declarations) without a toolchain.
type fakeWasm struct {
	manifest string   // "" for none
	imports  []Import // functions of type (i32) -> i32
	exports  []string // each a function of type (i32) -> i32
	body     []byte   // instructions of every exported function
}

// Opcodes used by the fake bodies.
var (
	bodyReturn0     = []byte{0x41, 0x00}                               // i32.const 0
	bodyUnreachable = []byte{0x00}                                     // unreachable
	bodyLoop        = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00} // loop br 0 end; i32.const 0
	bodyGrow64      = []byte{0x41, 0x40, 0x40, 0x00}                   // i32.const 64; memory.grow
	// simd is v128.const 0; drop: a SIMD instruction, which wazero runs
	// and wasmbin.AddDeadlineCheck refuses.
	simd = append(append([]byte{0xfd, 0x0c}, make([]byte, 16)...), 0x1a)
)

func (f fakeWasm) bytes() []byte {
	b := []byte(wasmfmt.Header)
	b = wasmfmt.AppendSection(b, 1, vec(1, []byte{0x60, 0x01, 0x7f, 0x01, 0x7f}))
	var imps []byte
	for _, i := range f.imports {
		imps = wasmfmt.AppendName(wasmfmt.AppendName(imps, i.Module), i.Name)
		imps = append(imps, wasmfmt.KindFunc, 0x00)
	}
	if len(f.imports) > 0 {
		b = wasmfmt.AppendSection(b, 2, vec(len(f.imports), imps))
	}
	funcs := make([]byte, len(f.exports)) // all type 0
	b = wasmfmt.AppendSection(b, 3, vec(len(f.exports), funcs))
	b = wasmfmt.AppendSection(b, 5, vec(1, []byte{0x00, 0x01})) // one page
	exps := append(wasmfmt.AppendName(nil, "memory"), wasmfmt.KindMemory, 0x00)
	for i, e := range f.exports {
		exps = wasmfmt.AppendName(exps, e)
		exps = append(exps, wasmfmt.KindFunc, byte(len(f.imports)+i))
	}
	b = wasmfmt.AppendSection(b, 7, vec(len(f.exports)+1, exps))
	var code []byte
	for range f.exports {
		fn := append([]byte{0x00}, f.body...) // no locals
		fn = append(fn, 0x0b)
		code = append(wasmfmt.AppendU32(code, uint32(len(fn))), fn...)
	}
	b = wasmfmt.AppendSection(b, 10, vec(len(f.exports), code))
	if f.manifest != "" {
		b = wasmfmt.AppendCustomSection(b, abi.ManifestSection, []byte(f.manifest))
	}
	return b
}

func vec(n int, items []byte) []byte { return append(wasmfmt.AppendU32(nil, uint32(n)), items...) }

// write puts the module in a test temp dir and returns its path.
func (f fakeWasm) write(t testing.TB, file string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(p, f.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func manifestJSON(name, prefix, hooks string) string {
	return `{"abi":1,"name":"` + name + `","version":"1","prefixes":["` + prefix + `"],"hooks":[` + hooks + `]}`
}
