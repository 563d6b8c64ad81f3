package extensions

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// tableModule is a module with one funcref table of min entries and no
// maximum, as Go declares its table, whose prepare hook returns what
// table.grow by delta entries returns: the old size, or -1.
func tableModule(t testing.TB, min uint32, delta uint32) string {
	t.Helper()
	valid := fakeWasm{manifest: manifestJSON("tables", "com.hostile.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}
	grow := wasmfmt.AppendS32([]byte{0xd0, 0x70, 0x41}, int32(delta)) // ref.null func; i32.const delta
	grow = append(grow, 0xfc, 0x0f, 0x00)                             // table.grow 0
	bin := withSection(t, valid.bytes(), wasmfmt.SectionTable, vec(1, wasmfmt.AppendU32([]byte{0x70, 0x00}, min)))
	bin = withSection(t, bin, wasmfmt.SectionCode, fnBody([]byte{0x00}, grow))
	p := filepath.Join(t.TempDir(), "tables.wasm")
	if err := os.WriteFile(p, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// table.grow stops at the bound plexus declares on a table without a
// maximum (MaxTableEntries): a grow past it returns -1, as the spec says
// for a grow past the maximum, instead of the host allocating 8 bytes an
// entry outside the module's memory cap (128 MiB for 2^24 entries). A
// grow within the bound works, under the smallest memory cap too.
func TestTableGrowBounded(t *testing.T) {
	const refused = "hook returned status 4294967295, want 0"
	cases := []struct {
		name     string
		delta    uint32
		want     string
		maxAlloc uint64
	}{
		// wazero's runtime and the module take well under 4 MiB; the
		// grows refused would take 128 MiB to 32 GiB.
		{"2^24 entries", 1 << 24, refused, 4 << 20},
		{"2^31 entries", 1 << 31, refused, 4 << 20},
		{"2^32-1 entries", 1<<32 - 1, refused, 4 << 20},
		{"one past the bound", MaxTableEntries, refused, 4 << 20},
		// The table's 8 MiB (8.6 measured with the rest).
		{"up to the bound", MaxTableEntries - 1, "hook returned status 1, want 0", 12 << 20},
	}
	for _, c := range cases {
		for _, longLived := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/longLived=%v", c.name, longLived), func(t *testing.T) {
				h := newHost(t, Config{Modules: []ModuleConfig{{Path: tableModule(t, 1, c.delta), MemoryLimitPages: 1}}, LongLived: longLived})
				var err error
				n := allocated(func() { err = runHook(h, "prepare", nil) })
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v\nwant %q", err, c.want)
				}
				if n > c.maxAlloc {
					t.Fatalf("the call allocated %d KiB, more than %d", n>>10, c.maxAlloc>>10)
				}
				t.Logf("%v (%d KiB allocated)", err, n>>10)
			})
		}
	}
}

// A module whose table's declared minimum is over the bound is refused
// before it is compiled, naming the table and both numbers, without the
// host allocating the table (2^27 entries, wazero's largest, are 1 GiB).
func TestTableMinimumOverBoundRefused(t *testing.T) {
	cases := []struct {
		min  uint32
		want string
	}{
		{MaxTableEntries + 1, "table 0 declares a minimum of 1048577 entries, more than the 1048576 entries allowed"},
		{1 << 27, "table 0 declares a minimum of 134217728 entries, more than the 1048576 entries allowed"},
	}
	for _, c := range cases {
		for _, longLived := range []bool{false, true} {
			t.Run(fmt.Sprintf("min=%d/longLived=%v", c.min, longLived), func(t *testing.T) {
				p := tableModule(t, c.min, 1)
				h := newHost(t, Config{Modules: []ModuleConfig{{Path: p}}, LongLived: longLived})
				var err error
				n := allocated(func() { err = runHook(h, "prepare", nil) })
				want := `extension "tables", hook prepare: loading ` + p + ": bounding its tables: table bound exceeded: " + c.want
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v\nwant %q", err, want)
				}
				if n > 4<<20 {
					t.Fatalf("refusing the module allocated %d KiB", n>>10)
				}
				if h.modules[0].rt != nil {
					t.Fatal("a runtime was kept for the refused module")
				}
			})
		}
	}
}

// The bounded module is the same under any memory cap, so the entry a
// warm (plexusctl) compiled with the defaults serves a config with its
// own cap: loading adds nothing to the cache.
func TestTableBoundKeepsCacheKey(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	p := tableModule(t, 1, 1)
	if _, err := Warm(ctx, dir, p); err != nil {
		t.Fatal(err)
	}
	entries := func() []string {
		m, err := filepath.Glob(filepath.Join(dir, "*", "*"))
		if err != nil || len(m) == 0 {
			t.Fatalf("no compiled module in %s: %v", dir, err)
		}
		return m
	}
	warmed := entries()
	for _, mc := range []ModuleConfig{{Path: p, MemoryLimitPages: 1}, {Path: p, MemoryLimit: "1Gi"}} {
		h := newHost(t, Config{CacheDir: dir, Modules: []ModuleConfig{mc}})
		if err := runHook(h, "prepare", nil); err == nil || !strings.Contains(err.Error(), "hook returned status 1") {
			t.Fatalf("%+v: err = %v", mc, err)
		}
		if got := entries(); !slices.Equal(got, warmed) {
			t.Fatalf("%+v: cache entries %v, want the warmed %v", mc, got, warmed)
		}
	}
}

// dwarfUnits is a .debug_info section of n minimal DWARF 4 compilation
// units (11 bytes each, no entries): Go's debug/dwarf, which wazero
// would run over it with debug info on, keeps a unit record for each.
func dwarfUnits(n int) []byte {
	var b []byte
	for range n {
		b = binary.LittleEndian.AppendUint32(b, 7) // unit length
		b = binary.LittleEndian.AppendUint16(b, 4) // version
		b = binary.LittleEndian.AppendUint32(b, 0) // abbrev offset
		b = append(b, 8)                           // address size
	}
	return b
}

// The host does not read DWARF (it only puts source lines in stack traces
// the host drops): a module carrying hostile debug sections loads, runs
// and traps with the usual error, allocating a few times its size and
// nothing for the debug sections' content.
func TestDebugSectionsIgnored(t *testing.T) {
	valid := fakeWasm{manifest: manifestJSON("debug", "com.hostile.", `"prepare"`), exports: []string{"prepare"}, body: bodyUnreachable}
	bin := valid.bytes()
	info := dwarfUnits(380000) // 4.2 MB, under the 4 MiB plexus reads of a custom section
	bin = wasmfmt.AppendCustomSection(bin, ".debug_info", info)
	bin = wasmfmt.AppendCustomSection(bin, ".debug_abbrev", []byte{0})
	bin = wasmfmt.AppendCustomSection(bin, ".debug_line", []byte{0xff, 0xff, 0xff, 0xff})
	bin = wasmfmt.AppendCustomSection(bin, ".debug_str", []byte{0})
	p := filepath.Join(t.TempDir(), "debug.wasm")
	if err := os.WriteFile(p, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, longLived := range []bool{false, true} {
		h := newHost(t, Config{Modules: []ModuleConfig{{Path: p}}, LongLived: longLived})
		var err error
		n := allocated(func() { err = runHook(h, "prepare", nil) })
		if err == nil || !strings.Contains(err.Error(), "trap: wasm error: unreachable") {
			t.Fatalf("longLived=%v: err = %v", longLived, err)
		}
		// Reading the file, checking, rewriting and decoding it cost a
		// few times its 4 MiB: 14 to 18 MiB measured. With debug info on,
		// debug/dwarf's records of the units made it 40 to 44.
		if n > 28<<20 {
			t.Fatalf("longLived=%v: the call allocated %d MiB", longLived, n>>20)
		}
		t.Logf("longLived=%v: %v (%d MiB allocated)", longLived, err, n>>20)
	}
}

// Go's table (one entry per function, no maximum) takes the bound: the
// examples run as before in thin mode and in plexusd, at the default
// memory cap and a small one.
func TestGoModulesTakeTableBound(t *testing.T) {
	cases := []struct {
		module, config, key, value, want string
	}{
		{"vlan", "", "com.example.vlan", "100", `"vlan":100`},
		{"overrides", `{"allow":["mtu"]}`, "io.plexus.overrides", `{"mtu":1400}`, `"mtu":1400`},
	}
	for _, c := range cases {
		for _, memory := range []string{"", "16Mi"} {
			for _, longLived := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/memory=%q/longLived=%v", c.module, memory, longLived), func(t *testing.T) {
					mc := ModuleConfig{Path: wasmPath(t, c.module), MemoryLimit: memory}
					if c.config != "" {
						mc.Config = []byte(c.config)
					}
					h := newHost(t, Config{Modules: []ModuleConfig{mc}, LongLived: longLived})
					req := prepareReq(bridgeConf, map[string]string{c.key: c.value}, nil)
					if err := h.Prepare(context.Background(), req); err != nil {
						t.Fatal(err)
					}
					if !strings.Contains(string(req.Attachment.Config), c.want) {
						t.Fatalf("config = %s, want %s in it", req.Attachment.Config, c.want)
					}
				})
			}
		}
	}
}
