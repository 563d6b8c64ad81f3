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
