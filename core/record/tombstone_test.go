package record

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTombstonesRememberOneInterface(t *testing.T) {
	ts := &Tombstones{Dir: filepath.Join(t.TempDir(), "deleted")}
	if ts.Has("c1", "eth0") {
		t.Fatal("tombstone before Put")
	}
	if err := ts.Put("c1", "eth0"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, ifName string
		want       bool
	}{
		{"c1", "eth0", true},
		{"c1", "eth1", false},
		{"c1", "", false},
		{"c2", "eth0", false},
		{"../c1", "eth0", false},
	} {
		if got := ts.Has(tc.id, tc.ifName); got != tc.want {
			t.Errorf("Has(%q, %q) = %v, want %v", tc.id, tc.ifName, got, tc.want)
		}
	}
	if err := ts.Remove("c1"); err != nil {
		t.Fatal(err)
	}
	if ts.Has("c1", "eth0") {
		t.Error("tombstone after Remove")
	}
	if err := ts.Remove("c1"); err != nil {
		t.Errorf("removing a missing tombstone: %v", err)
	}
}

func TestTombstonesRefuseBadNames(t *testing.T) {
	ts := &Tombstones{Dir: t.TempDir()}
	for _, tc := range [][2]string{{"../x", "eth0"}, {"c1", "../../etc"}, {"", "eth0"}} {
		if err := ts.Put(tc[0], tc[1]); err == nil {
			t.Errorf("Put(%q, %q) accepted", tc[0], tc[1])
		}
	}
}

// TestTombstonesAreBounded: past Max, the oldest go.
func TestTombstonesAreBounded(t *testing.T) {
	ts := &Tombstones{Dir: t.TempDir(), Max: 8}
	old := time.Now().Add(-time.Hour)
	for i := range 9 {
		id := fmt.Sprintf("c%d", i)
		if err := ts.Put(id, "eth0"); err != nil {
			t.Fatal(err)
		}
		if i < 8 {
			// c0 is the oldest, c7 the newest of the first eight.
			mt := old.Add(time.Duration(i) * time.Minute)
			if err := os.Chtimes(filepath.Join(ts.Dir, id), mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids, err := ts.list()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 6 {
		t.Fatalf("%d tombstones after passing the bound of 8, want 6: %v", len(ids), ids)
	}
	for i := range 3 {
		if ts.Has(fmt.Sprintf("c%d", i), "eth0") {
			t.Errorf("oldest tombstone c%d kept", i)
		}
	}
	if !ts.Has("c8", "eth0") {
		t.Error("newest tombstone removed")
	}
}

func TestTombstonesPrune(t *testing.T) {
	ts := &Tombstones{Dir: t.TempDir()}
	for _, id := range []string{"live", "gone"} {
		if err := ts.Put(id, "eth0"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Prune(func(id string) bool { return id == "live" }); err != nil {
		t.Fatal(err)
	}
	if !ts.Has("live", "eth0") || ts.Has("gone", "eth0") {
		t.Error("Prune kept the wrong tombstones")
	}
}
