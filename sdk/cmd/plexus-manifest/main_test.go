package main

import (
	"bytes"
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
