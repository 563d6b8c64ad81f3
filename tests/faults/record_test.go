package faults

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// recordDamage is one way the attachment record can be unusable or out of
// date when DEL comes: a torn write by another tool, a disk error, an old
// plexus. The record is a journal, one line per update, so a damage that
// edits the record edits every line.
type recordDamage struct {
	name   string
	damage func(t *testing.T, path string, good []byte)
}

func write(content string) func(*testing.T, string, []byte) {
	return func(t *testing.T, path string, _ []byte) {
		harness.Must(t, os.WriteFile(path, []byte(content), 0o600))
	}
}

func recordDamages() []recordDamage {
	return []recordDamage{
		{name: "truncated", damage: func(t *testing.T, path string, good []byte) {
			harness.Must(t, os.WriteFile(path, good[:len(good)*2/3], 0o600))
		}},
		{name: "only its first line", damage: func(t *testing.T, path string, good []byte) {
			// One line per attachment (default, n1, n2) plus the last.
			if n := bytes.Count(good, []byte("\n")); n != 4 {
				t.Fatalf("record journal has %d lines, want one per attachment plus the last", n)
			}
			harness.Must(t, os.WriteFile(path, good[:bytes.IndexByte(good, '\n')+1], 0o600))
		}},
		{name: "garbage", damage: write("\x7fELF\x00\x01 not a record")},
		{name: "empty", damage: write("")},
		{name: "null", damage: write("null")},
		{name: "wrong version", damage: func(t *testing.T, path string, good []byte) {
			harness.Must(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(good), `"version":1`, `"version":99`)), 0o600))
		}},
		{name: "other container", damage: func(t *testing.T, path string, good []byte) {
			harness.Must(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(good), `"containerID":"direct-web"`, `"containerID":"someone-else"`)), 0o600))
		}},
		{name: "path-like interface", damage: func(t *testing.T, path string, good []byte) {
			harness.Must(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(good), `"ifName":"net1"`, `"ifName":"../../x"`)), 0o600))
		}},
		{name: "directory", damage: func(t *testing.T, path string, _ []byte) {
			harness.Must(t, os.Remove(path))
			harness.Must(t, os.MkdirAll(filepath.Join(path, "junk"), 0o700))
		}},
	}
}

// TestDelWithUnusableRecord: whatever happened to the record, DEL detaches
// every network libcni's own result cache knows (s7.2: DEL must not leave
// attachments behind), removes the record and succeeds.
func TestDelWithUnusableRecord(t *testing.T) {
	for _, d := range recordDamages() {
		t.Run(d.name, func(t *testing.T) {
			h := harness.New(t)
			h.BridgeNAD("demo", "n1")
			h.BridgeNAD("demo", "n2")
			h.Pod("demo", "web", "n1,n2")
			c := h.Container("demo", "web")
			before := harness.HostVeths(t)
			h.MustPlugin(c, "ADD", "")
			rec := filepath.Join(h.CacheDir, "records", "direct-web.json")
			good, err := os.ReadFile(rec)
			harness.Must(t, err)
			d.damage(t, rec, good)
			if _, e := h.Plugin(c, "DEL"); e != nil {
				t.Fatalf("DEL with a %s record: %+v", d.name, e)
			}
			assertClean(t, h, c, before)
		})
	}
}

// TestAddOverUnusableRecord: a repeated ADD finds an unusable record from
// the first; it undoes what libcni's cache knows before attaching again,
// so nothing is attached twice.
func TestAddOverUnusableRecord(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "n1")
	h.MustPlugin(c, "ADD", "")
	harness.Must(t, os.WriteFile(filepath.Join(h.CacheDir, "records", "direct-web.json"), []byte("{"), 0o600))
	h.MustPlugin(c, "ADD", "second ADD over a torn record")
	h.AssertInterfaces(c, 2, "eth0 and net1 once")
	if n := len(harness.HostVeths(t)) - len(before); n != 2 {
		t.Errorf("%d new host veths, want 2 (one per attachment)", n)
	}
	delClean(t, h, c, before, "")
}
