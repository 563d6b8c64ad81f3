package security

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
	"github.com/plexus-cni/plexus/tests/harness"
)

// escapeFile is where the hostile module's write attempt would land
// (extensions/testdata/hostile/misbehave, mode "fs").
const escapeFile = "/tmp/plexus-sandbox-escape"

// hostileModule builds one of extensions/testdata/hostile as the SDK's
// build does: a wasip1 reactor with its manifest appended.
func hostileModule(t *testing.T, name string) string {
	t.Helper()
	src, err := filepath.Abs("../../extensions/testdata/hostile")
	harness.Must(t, err)
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./"+name)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building hostile module %s: %v\n%s", name, err, b)
	}
	manifest, err := os.ReadFile(filepath.Join(src, name, "manifest.json"))
	harness.Must(t, err)
	wasm, err := os.ReadFile(out)
	harness.Must(t, err)
	harness.Must(t, os.WriteFile(out, wasmfmt.AppendCustomSection(wasm, abi.ManifestSection, manifest), 0o644))
	return out
}

// TestModuleCannotReachFileSystem: a module runs in wazero with WASI but
// no preopened directory, so reading, writing and listing the host's files
// all fail inside the module. Its rejection fails the ADD (code 103) with
// the module's report; nothing is attached and nothing is written.
func TestModuleCannotReachFileSystem(t *testing.T) {
	if _, err := os.Stat(escapeFile); err == nil {
		t.Fatalf("%s exists before the test; remove it", escapeFile)
	}
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{
		map[string]any{"path": hostileModule(t, "misbehave"), "config": map[string]any{"mode": "fs"}},
	}})
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", `[{"name":"net-a","com.hostile.x":1}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	_, e := h.Plugin(c, "ADD")
	harness.AssertCNIError(t, e, 103, "pod demo/web", "demo/net-a", "file system: read: ", "write: ", "list: ")
	if e != nil {
		t.Logf("the module's report: %s", e.Msg)
	}
	if e != nil && strings.Contains(e.Msg, "ESCAPED") {
		t.Errorf("the module reached the host's file system: %s", e.Msg)
	}
	if _, err := os.Stat(escapeFile); err == nil {
		os.Remove(escapeFile)
		t.Errorf("the module wrote %s on the host", escapeFile)
	}
	assertNothingAttached(t, h, c, before)
}

// TestModuleWithForbiddenImportRefused: a module importing a host function
// outside the ABI is refused when plexus loads its config, before any pod
// is read or module code runs: code 7 (invalid network configuration, an
// admin's mistake), naming the module and the import; nothing is attached.
func TestModuleWithForbiddenImportRefused(t *testing.T) {
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{
		map[string]any{"path": hostileModule(t, "evilimport")},
	}})
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", `[{"name":"net-a","org.evil.x":1}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.AddRefused(c, before, 7, "evilimport.wasm", "import env.evil is not allowed")
}

// overclaimingModule is a module whose one function, the prepare hook,
// declares 4,294,967,295 locals in six bytes: wazero would allocate 4 GiB
// for them before reading on.
func overclaimingModule(t *testing.T) string {
	t.Helper()
	vec := func(n int, items ...byte) []byte { return append(wasmfmt.AppendU32(nil, uint32(n)), items...) }
	m := []byte(wasmfmt.Header)
	m = wasmfmt.AppendSection(m, wasmfmt.SectionType, vec(1, 0x60, 0x01, 0x7f, 0x01, 0x7f)) // (i32) -> i32
	m = wasmfmt.AppendSection(m, wasmfmt.SectionFunction, vec(1, 0x00))
	m = wasmfmt.AppendSection(m, wasmfmt.SectionMemory, vec(1, 0x00, 0x01))
	exports := append(wasmfmt.AppendName(nil, "memory"), wasmfmt.KindMemory, 0x00)
	exports = append(wasmfmt.AppendName(exports, "prepare"), wasmfmt.KindFunc, 0x00)
	m = wasmfmt.AppendSection(m, wasmfmt.SectionExport, vec(2, exports...))
	fn := append(vec(1), wasmfmt.AppendU32(nil, 1<<32-1)...) // one declaration of 2^32-1...
	fn = append(fn, 0x7f, 0x41, 0x00, 0x0b)                  // ...i32 locals; i32.const 0; end
	m = wasmfmt.AppendSection(m, wasmfmt.SectionCode, vec(1, append(wasmfmt.AppendU32(nil, uint32(len(fn))), fn...)...))
	manifest := `{"abi":1,"name":"overclaim","version":"1","prefixes":["com.hostile."],"hooks":["prepare"]}`
	p := filepath.Join(t.TempDir(), "overclaim.wasm")
	harness.Must(t, os.WriteFile(p, wasmfmt.AppendCustomSection(m, abi.ManifestSection, []byte(manifest)), 0o644))
	return p
}

// TestOverclaimingModuleRefused: a module whose declared counts exceed its
// bytes or plexus's limits is refused before wazero allocates for them
// (before the check the plugin died allocating, exit status 2, no CNI
// error); the ADD fails as a module failure (code 103) naming the module,
// the function and the count, and nothing is attached.
func TestOverclaimingModuleRefused(t *testing.T) {
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{map[string]any{"path": overclaimingModule(t)}}})
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", `[{"name":"net-a","com.hostile.x":1}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	_, e := h.Plugin(c, "ADD")
	harness.AssertCNIError(t, e, 103, "pod demo/web", "demo/net-a", `extension "overclaim"`,
		"function body 0 declares 4294967295 locals, more than 50000")
	if e != nil {
		t.Logf("the refusal: %s", e.Msg)
	}
	assertNothingAttached(t, h, c, before)
}

// tableGrowModule is a module whose prepare hook grows its table, which
// declares no maximum (as Go's does not), by 2^31 entries: 16 GiB of the
// host's memory at wazero's 8 bytes an entry, outside the module's memory
// cap, before plexus bounded tables. It returns "{}" (no change) when the
// grow returns -1, and traps when it succeeds.
func tableGrowModule(t *testing.T) string {
	t.Helper()
	vec := func(n int, items ...byte) []byte { return append(wasmfmt.AppendU32(nil, uint32(n)), items...) }
	m := []byte(wasmfmt.Header)
	m = wasmfmt.AppendSection(m, wasmfmt.SectionType, vec(2,
		0x60, 0x01, 0x7f, 0x01, 0x7f, // 0: (i32) -> i32, the hook
		0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f)) // 1: (i32, i32) -> i32, output_write
	imp := append(wasmfmt.AppendName(wasmfmt.AppendName(nil, abi.HostModule), "output_write"), wasmfmt.KindFunc, 0x01)
	m = wasmfmt.AppendSection(m, wasmfmt.SectionImport, vec(1, imp...))
	m = wasmfmt.AppendSection(m, wasmfmt.SectionFunction, vec(1, 0x00))
	m = wasmfmt.AppendSection(m, wasmfmt.SectionTable, vec(1, 0x70, 0x00, 0x01)) // funcref, min 1, no max
	m = wasmfmt.AppendSection(m, wasmfmt.SectionMemory, vec(1, 0x00, 0x01))
	exports := append(wasmfmt.AppendName(nil, "memory"), wasmfmt.KindMemory, 0x00)
	exports = append(wasmfmt.AppendName(exports, "prepare"), wasmfmt.KindFunc, 0x01)
	m = wasmfmt.AppendSection(m, wasmfmt.SectionExport, vec(2, exports...))
	fn := wasmfmt.AppendS32([]byte{0x00, 0xd0, 0x70, 0x41}, -1<<31) // no locals; ref.null func; i32.const 2^31
	fn = append(fn, 0xfc, 0x0f, 0x00,                               // table.grow 0
		0x41, 0x7f, 0x47, 0x04, 0x40, 0x00, 0x0b, // i32.const -1; i32.ne; if unreachable end
		0x41, 0x00, 0x41, 0x02, 0x10, 0x00, 0x1a, // output_write(0, 2); drop
		0x41, 0x00, 0x0b) // i32.const 0; end
	m = wasmfmt.AppendSection(m, wasmfmt.SectionCode, vec(1, append(wasmfmt.AppendU32(nil, uint32(len(fn))), fn...)...))
	m = wasmfmt.AppendSection(m, wasmfmt.SectionData, vec(1, 0x00, 0x41, 0x00, 0x0b, 0x02, '{', '}')) // "{}" at 0
	manifest := `{"abi":1,"name":"tablegrow","version":"1","prefixes":["com.hostile."],"hooks":["prepare"]}`
	p := filepath.Join(t.TempDir(), "tablegrow.wasm")
	harness.Must(t, os.WriteFile(p, wasmfmt.AppendCustomSection(m, abi.ManifestSection, []byte(manifest)), 0o644))
	return p
}

// TestTableGrowBombContained: a module capped at one page of memory asks
// for a table of 2^31 entries. plexus declares a maximum on the table
// before compiling it (2^20 entries in all), so the grow returns
// -1 inside the module, which carries on: the ADD succeeds with the
// plexus process's peak memory that of any ADD, and the DEL leaves
// nothing. Before, the process allocated 16 GiB or died trying.
func TestTableGrowBombContained(t *testing.T) {
	h := harness.New(t)
	h.Set("extensions", map[string]any{"modules": []any{
		map[string]any{"path": tableGrowModule(t), "memoryLimitPages": 1},
	}})
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", `[{"name":"net-a","com.hostile.x":1}]`)
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	out, rusage := h.PluginRusage(c, "ADD")
	if rusage == nil {
		t.Fatalf("ADD failed (the grow was not refused, or the module not loaded): %s", out)
	}
	// A thin ADD peaks at a few tens of MiB (tests/bench BenchmarkThinMemory).
	if peak := rusage.Maxrss >> 10; peak > 200 {
		t.Errorf("the plexus process peaked at %d MiB", peak)
	}
	t.Logf("peak resident memory of the ADD: %d MiB", rusage.Maxrss>>10)
	h.AssertIfNames(c, "eth0", "net1")
	h.DelDetached(c, before, "")
}
