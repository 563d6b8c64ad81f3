// Command plexus-manifest appends a module's declaration to a .wasm file as
// the "plexus.manifest" custom section: Go has no directive for custom
// sections, so the build adds it after go build.
//
//	plexus-manifest -manifest manifest.json module.wasm
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

const section = abi.ManifestSection

func main() {
	manifest := flag.String("manifest", "manifest.json", "the declaration (JSON)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: plexus-manifest -manifest FILE MODULE.wasm")
		os.Exit(2)
	}
	if err := appendManifest(*manifest, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "plexus-manifest:", err)
		os.Exit(1)
	}
}

func appendManifest(manifestPath, wasmPath string) error {
	payload, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	var probe abi.Manifest
	if err := json.Unmarshal(payload, &probe); err != nil || probe.ABI == 0 {
		return fmt.Errorf("%s: not a manifest with an \"abi\" version", manifestPath)
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return err
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return fmt.Errorf("%s: not a wasm binary", wasmPath)
	}
	// A rebuild that go build found up to date leaves the file as it was,
	// manifest included: replace it rather than add a second one.
	wasm, err = withoutSection(wasm, section)
	if err != nil {
		return fmt.Errorf("%s: %w", wasmPath, err)
	}
	return os.WriteFile(wasmPath, wasmfmt.AppendCustomSection(wasm, section, payload), 0o644)
}

// withoutSection copies a module without its custom sections named name.
func withoutSection(wasm []byte, name string) ([]byte, error) {
	sections, err := wasmfmt.Sections(wasm)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), wasm[:len(wasmfmt.Header)]...)
	for _, s := range sections {
		if s.ID != wasmfmt.SectionCustom || s.Name != name {
			out = wasmfmt.AppendSection(out, s.ID, s.Body)
		}
	}
	return out, nil
}
