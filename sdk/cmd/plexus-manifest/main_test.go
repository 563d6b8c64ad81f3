package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestAppendSection(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	name := "plexus.manifest"
	payload := bytes.Repeat([]byte("x"), 200) // size needs two LEB128 bytes
	got := appendSection(wasm, name, payload)
	want := append([]byte("\x00asm\x01\x00\x00\x00\x00"), 0xd8, 0x01, byte(len(name)))
	want = append(append(want, name...), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got[:16], want[:16])
	}
}

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
