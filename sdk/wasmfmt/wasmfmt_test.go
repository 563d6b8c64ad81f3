package wasmfmt

import (
	"bytes"
	"errors"
	"testing"
)

func TestU32RoundTrips(t *testing.T) {
	for _, c := range []struct {
		v    uint32
		want []byte
	}{
		{0, []byte{0x00}},
		{127, []byte{0x7F}},
		{128, []byte{0x80, 0x01}},
		{624485, []byte{0xE5, 0x8E, 0x26}},
		{1<<32 - 1, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0x0F}},
	} {
		b := AppendU32([]byte{0xAA}, c.v)
		if !bytes.Equal(b[1:], c.want) {
			t.Errorf("AppendU32(%d) = % x, want % x", c.v, b[1:], c.want)
		}
		v, next, err := ReadU32(b, 1)
		if err != nil || v != c.v || next != len(b) {
			t.Errorf("ReadU32(% x) = %d, %d, %v", b, v, next, err)
		}
	}
}

func TestReadU32RefusesBadNumbers(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":        {},
		"truncated":    {0x80, 0x80},
		"six bytes":    {0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		"over 32 bits": {0xFF, 0xFF, 0xFF, 0xFF, 0x1F},
	} {
		if _, _, err := ReadU32(b, 0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestAppendS32(t *testing.T) {
	for _, c := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x00}},
		{63, []byte{0x3F}},
		{64, []byte{0xC0, 0x00}},
		{-1, []byte{0x7F}},
		{-64, []byte{0x40}},
		{-65, []byte{0xBF, 0x7F}},
		{1 << 14, []byte{0x80, 0x80, 0x01}},
	} {
		got := AppendS32(nil, c.v)
		if !bytes.Equal(got, c.want) {
			t.Errorf("AppendS32(%d) = % x, want % x", c.v, got, c.want)
		}
		if next, err := Skip(got, 0, 5); err != nil || next != len(got) {
			t.Errorf("Skip(% x) = %d, %v", got, next, err)
		}
	}
	if _, err := Skip([]byte{0x80, 0x80}, 0, 5); !errors.Is(err, ErrMalformed) {
		t.Errorf("Skip of a truncated number: err = %v", err)
	}
}

func TestAppendCustomSection(t *testing.T) {
	name := "plexus.manifest"
	payload := bytes.Repeat([]byte("x"), 200) // size needs two LEB128 bytes
	got := AppendCustomSection([]byte(Header), name, payload)
	want := append([]byte(Header+"\x00"), 0xd8, 0x01, byte(len(name)))
	want = append(append(want, name...), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got[:16], want[:16])
	}
}

func TestSections(t *testing.T) {
	m := AppendSection([]byte(Header), 1, []byte{0x00})
	m = AppendCustomSection(m, "plexus.manifest", []byte("{}"))
	got, err := Sections(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != SectionCustom || got[1].Name != "plexus.manifest" ||
		!bytes.HasSuffix(got[1].Body, []byte("{}")) {
		t.Fatalf("sections = %+v", got)
	}
	for name, bad := range map[string][]byte{
		"not wasm":     []byte("hello, world"),
		"overrun":      append([]byte(Header), 0x01, 0x7F),
		"bad size":     append([]byte(Header), 0x01, 0x80),
		"name overrun": append([]byte(Header), 0x00, 0x02, 0x05, 'a'),
	} {
		if _, err := Sections(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestDecoderReadsImportsAndExports(t *testing.T) {
	imps := AppendU32(nil, 4)
	imps = append(AppendName(AppendName(imps, "m"), "f"), KindFunc, 0x02)
	imps = append(AppendName(AppendName(imps, "m"), "t"), KindTable, 0x70, 0x01, 0x01, 0x05) // funcref, min 1 max 5
	imps = append(AppendName(AppendName(imps, "m"), "mem"), KindMemory, 0x00, 0x01)          // min 1
	imps = append(AppendName(AppendName(imps, "m"), "g"), KindGlobal, 0x7F, 0x00)            // const i32
	d := NewDecoder(imps)
	got := d.Imports()
	if d.Err() != nil || len(got) != 4 || got[1] != (Import{Module: "m", Name: "t", Kind: KindTable}) ||
		got[3].Name != "g" || d.Pos() != len(imps) {
		t.Fatalf("imports = %+v, %v", got, d.Err())
	}
	bad := append(AppendName(AppendName(AppendU32(nil, 1), "m"), "x"), 0x09)
	d = NewDecoder(bad)
	if d.Imports(); !errors.Is(d.Err(), ErrMalformed) {
		t.Fatalf("unknown import kind: err = %v", d.Err())
	}

	exps := append(AppendName(AppendU32(nil, 1), "run"), KindFunc)
	exps = AppendU32(exps, 300)
	d = NewDecoder(exps)
	if e := d.Exports(); d.Err() != nil || len(e) != 1 || e[0] != (Export{Name: "run", Kind: KindFunc, Index: 300}) {
		t.Fatalf("exports = %+v, %v", e, d.Err())
	}
	d = NewDecoder(exps[:len(exps)-1])
	if d.Exports(); !errors.Is(d.Err(), ErrMalformed) {
		t.Fatalf("truncated export: err = %v", d.Err())
	}
}
