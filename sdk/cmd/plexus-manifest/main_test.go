package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestAppendManifestTwiceKeepsOne(t *testing.T) {
	dir := t.TempDir()
	wasm := filepath.Join(dir, "m.wasm")
	man := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(wasm, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(man, []byte(`{"abi":1,"name":"m"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := appendManifest(man, wasm); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(wasm)
	if n := bytes.Count(b, []byte(section)); n != 1 {
		t.Fatalf("%d manifest sections after two runs, want 1", n)
	}
}
