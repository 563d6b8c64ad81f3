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
