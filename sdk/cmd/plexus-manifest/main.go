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
)

const section = "plexus.manifest"

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
	var probe struct {
		ABI int `json:"abi"`
	}
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
	return os.WriteFile(wasmPath, appendSection(wasm, section, payload), 0o644)
}

// appendSection adds a custom section: id 0, LEB128 size, LEB128 name
// length, name, payload.
func appendSection(wasm []byte, name string, payload []byte) []byte {
	body := uleb(nil, uint32(len(name)))
	body = append(append(body, name...), payload...)
	out := uleb(append(wasm, 0), uint32(len(body)))
	return append(out, body...)
}

func uleb(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
