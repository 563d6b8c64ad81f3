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
	// A rebuild that go build found up to date leaves the file as it was,
	// manifest included: replace it rather than add a second one.
	wasm, err = withoutSection(wasm, section)
	if err != nil {
		return fmt.Errorf("%s: %w", wasmPath, err)
	}
	return os.WriteFile(wasmPath, appendSection(wasm, section, payload), 0o644)
}

// withoutSection copies a module without its custom sections named name.
func withoutSection(wasm []byte, name string) ([]byte, error) {
	out := append([]byte(nil), wasm[:8]...)
	for i := 8; i < len(wasm); {
		id := wasm[i]
		size, n, err := readULEB(wasm[i+1:])
		if err != nil {
			return nil, fmt.Errorf("section at offset %d: %w", i, err)
		}
		end := i + 1 + n + int(size)
		if end > len(wasm) {
			return nil, fmt.Errorf("section at offset %d runs past the end", i)
		}
		if id != 0 || customName(wasm[i+1+n:end]) != name {
			out = append(out, wasm[i:end]...)
		}
		i = end
	}
	return out, nil
}

// customName is the name at the start of a custom section's content.
func customName(content []byte) string {
	l, n, err := readULEB(content)
	if err != nil || n+int(l) > len(content) {
		return ""
	}
	return string(content[n : n+int(l)])
}

func readULEB(b []byte) (uint32, int, error) {
	var v uint32
	for i := 0; i < 5 && i < len(b); i++ {
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("bad LEB128 size")
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
