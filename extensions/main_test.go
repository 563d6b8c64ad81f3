package extensions

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// Go-built test modules: the shipped examples and the hostile modules.
// They are built once per test binary, on first use, into a temp dir;
// PLEXUS_EXT_WASM_DIR points at modules built by "make ext-examples"
// instead (then the hostile ones must be there too).
var goModules = []struct{ moduleDir, pkg string }{
	{"examples", "overrides"},
	{"examples", "vlan"},
	{"examples", "enricher"},
	{"testdata/hostile", "misbehave"},
	{"testdata/hostile", "evilimport"},
}

// builtDir is the test binary's module cache: one build shared by all tests.
var builtDir = sync.OnceValues(buildGoModules)

// compiledDir is the test binary's compilation cache, which newHost
// gives every host without its own: the same few modules are compiled
// once, not once per test.
var compiledDir = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "plexus-ext-compiled-")
	if err == nil {
		tempDirs = append(tempDirs, dir)
	}
	return dir, err
})

var tempDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// wasmPath returns the built module's path, building all on first use.
func wasmPath(t testing.TB, name string) string {
	t.Helper()
	dir, err := builtDir()
	if err != nil {
		t.Fatalf("building test modules: %v", err)
	}
	return filepath.Join(dir, name+".wasm")
}

func buildGoModules() (string, error) {
	if dir := os.Getenv("PLEXUS_EXT_WASM_DIR"); dir != "" {
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "plexus-ext-wasm-")
	if err != nil {
		return "", err
	}
	tempDirs = append(tempDirs, dir)
	errs := make([]error, len(goModules))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, g := range goModules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = buildGoModule(g.moduleDir, g.pkg, filepath.Join(dir, g.pkg+".wasm"))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", err
		}
	}
	return dir, nil
}

// buildGoModule does what mk/ext.mk does: go build as a wasip1 reactor,
// then append manifest.json as the plexus.manifest custom section.
func buildGoModule(moduleDir, pkg, out string) error {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./"+pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s/%s: %v\n%s", moduleDir, pkg, err, b)
	}
	manifest, err := os.ReadFile(filepath.Join(moduleDir, pkg, "manifest.json"))
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	return os.WriteFile(out, wasmfmt.AppendCustomSection(wasm, abi.ManifestSection, manifest), 0o644)
}
