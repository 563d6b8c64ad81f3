package extensions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// withSection returns bin with the section of the id replaced by body, or
// body added as that section, in its place, when bin has none.
func withSection(t testing.TB, bin []byte, id byte, body []byte) []byte {
	t.Helper()
	sections, err := wasmfmt.Sections(bin)
	if err != nil {
		t.Fatal(err)
	}
	out := []byte(wasmfmt.Header)
	added := false
	for _, s := range sections {
		switch {
		case s.ID == id:
			s.Body, added = body, true
		case !added && s.ID != wasmfmt.SectionCustom && s.ID > id:
			out, added = wasmfmt.AppendSection(out, id, body), true
		}
		out = wasmfmt.AppendSection(out, s.ID, s.Body)
	}
	if !added {
		out = wasmfmt.AppendSection(out, id, body)
	}
	return out
}

// fnBody is a code section of one function body: locals declarations,
// then instructions and end.
func fnBody(locals, instrs []byte) []byte {
	fn := append(append(locals, instrs...), 0x0b)
	return vec(1, append(wasmfmt.AppendU32(nil, uint32(len(fn))), fn...))
}

var huge = wasmfmt.AppendU32(nil, 1<<32-1)

// A module whose vectors claim far more entries than it has bytes fails
// its first hook call with an error naming the section and the count,
// without the gigabytes wazero would allocate for it, in thin mode and in
// plexusd alike. wazero's own reading refuses a br_table claiming four
// billion targets: it collects them as it reads.
func TestOverclaimingModulesRefused(t *testing.T) {
	valid := fakeWasm{manifest: manifestJSON("hostile", "com.hostile.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}
	cases := []struct {
		name    string
		id      byte
		section []byte
		want    string
	}{
		{"functions", wasmfmt.SectionFunction, huge, "function section at offset 16: malformed Wasm: 4294967295 functions claimed in 0 bytes"},
		{"types", wasmfmt.SectionType, append(huge, 0x60, 0x00, 0x00), "type section at offset 8: malformed Wasm: 4294967295 types claimed in 3 bytes"},
		{"locals", wasmfmt.SectionCode, fnBody(append(vec(1, huge), 0x7f), bodyReturn0),
			"function body 0 declares 4294967295 locals, more than 50000"},
		{"br_table", wasmfmt.SectionCode, fnBody([]byte{0x00}, append([]byte{0x41, 0x00, 0x41, 0x00, 0x0e}, huge...)),
			"invalid function[0]"},
		{"data segments", wasmfmt.SectionData, huge, "data section at offset 161: malformed Wasm: 4294967295 data segments claimed in 0 bytes"},
		{"data bytes", wasmfmt.SectionData, vec(1, append([]byte{0x01}, huge...)), "4294967295 data bytes claimed in 0 bytes"},
	}
	for _, c := range cases {
		for _, longLived := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/longLived=%v", c.name, longLived), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "hostile.wasm")
				if err := os.WriteFile(p, withSection(t, valid.bytes(), c.id, c.section), 0o644); err != nil {
					t.Fatal(err)
				}
				h := newHost(t, Config{Modules: []ModuleConfig{{Path: p}}, LongLived: longLived})
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := runHook(h, "prepare", nil)
				runtime.ReadMemStats(&after)
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `extension "hostile", hook prepare: loading `+p) {
					t.Fatalf("err = %v\nwant %q", err, c.want)
				}
				// Tens of KiB for wazero's runtime, against the 4 to 16 GiB claimed.
				if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
					t.Fatalf("refusing the module allocated %d KiB", n>>10)
				}
				t.Logf("%v (%d KiB allocated)", err, (after.TotalAlloc-before.TotalAlloc)>>10)
				if h.modules[0].rt != nil {
					t.Fatal("a runtime was kept for the refused module")
				}
			})
		}
	}
}

// The control: the valid module the cases above spoil loads.
func TestOverclaimingModulesControl(t *testing.T) {
	valid := fakeWasm{manifest: manifestJSON("hostile", "com.hostile.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}
	locals := fakeWasm{manifest: valid.manifest, exports: valid.exports}
	for name, bin := range map[string][]byte{
		"as built": valid.bytes(),
		// 50,000 locals (two declarations) and a data segment pass too.
		"at the limits": withSection(t, withSection(t, locals.bytes(), wasmfmt.SectionCode,
			fnBody(append(append(vec(2, wasmfmt.AppendU32(nil, 49999)), 0x7f, 0x01), 0x7e), bodyReturn0)),
			wasmfmt.SectionData, vec(1, []byte{0x01, 0x03, 'a', 'b', 'c'})),
	} {
		p := filepath.Join(t.TempDir(), "valid.wasm")
		if err := os.WriteFile(p, bin, 0o644); err != nil {
			t.Fatal(err)
		}
		h := newHost(t, Config{Modules: []ModuleConfig{{Path: p}}})
		if err := runHook(h, "prepare", nil); err == nil || !strings.Contains(err.Error(), "output is not a JSON object") {
			t.Fatalf("%s: err = %v, want the hook to run and return no output", name, err)
		}
	}
}

// A module file over MaxModuleBytes is refused when its declaration is
// read, before anything else.
func TestOversizedModuleRefused(t *testing.T) {
	valid := fakeWasm{manifest: manifestJSON("big", "com.big.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}
	pad := make([]byte, MaxModuleBytes)
	p := filepath.Join(t.TempDir(), "big.wasm")
	if err := os.WriteFile(p, wasmfmt.AppendCustomSection(valid.bytes(), "pad", pad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Config{Modules: []ModuleConfig{{Path: p}}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bytes, more than the %d plexus loads", MaxModuleBytes)) {
		t.Fatalf("err = %v", err)
	}
}
