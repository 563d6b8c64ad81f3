package record

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestTombstonesRememberOneInterface(t *testing.T) {
	ts := &Tombstones{Dir: filepath.Join(t.TempDir(), "deleted")}
	if has(ts, "c1", "eth0") {
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
		if got := has(ts, tc.id, tc.ifName); got != tc.want {
			t.Errorf("Has(%q, %q) = %v, want %v", tc.id, tc.ifName, got, tc.want)
		}
	}
	if err := ts.Remove("c1"); err != nil {
		t.Fatal(err)
	}
	if has(ts, "c1", "eth0") {
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

// TestTombstonesAreBounded: the directory never holds more than Max
// files, and the latest Put is always remembered.
func TestTombstonesAreBounded(t *testing.T) {
	ts := &Tombstones{Dir: t.TempDir(), Max: 8}
	for i := range 100 {
		id := fmt.Sprintf("c%d", i)
		if err := ts.Put(id, "eth0"); err != nil {
			t.Fatal(err)
		}
		if !has(ts, id, "eth0") {
			t.Fatalf("tombstone of %s missing right after its Put", id)
		}
	}
	entries, err := os.ReadDir(ts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 8 {
		t.Fatalf("%d tombstone files after 100 Puts, over the bound of 8", len(entries))
	}
}

// TestTombstonesSharingASlot: a container hashed to another's slot takes
// it over; the one it displaced reads as forgotten and Remove leaves the
// new one alone.
func TestTombstonesSharingASlot(t *testing.T) {
	ts := &Tombstones{Dir: t.TempDir(), Max: 1}
	if err := ts.Put("c1", "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := ts.Put("c2", "eth0"); err != nil {
		t.Fatal(err)
	}
	if has(ts, "c1", "eth0") || !has(ts, "c2", "eth0") {
		t.Fatal("the slot does not name the latest container")
	}
	if err := ts.Remove("c1"); err != nil {
		t.Fatal(err)
	}
	if !has(ts, "c2", "eth0") {
		t.Error("removing c1's forgotten tombstone removed c2's")
	}
}

// TestTombstonesReadNothingElse: files in the directory that are not
// slots (another layout, junk, a FIFO) are no tombstone, and Prune
// removes them.
func TestTombstonesReadNothingElse(t *testing.T) {
	ts := &Tombstones{Dir: t.TempDir(), Max: 1}
	slot, err := ts.slotOf("c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(p string) error
	}{
		{"interface only", func(p string) error { return os.WriteFile(p, []byte("eth0"), 0o600) }},
		{"bad interface", func(p string) error { return os.WriteFile(p, []byte("c1\n../x"), 0o600) }},
		{"oversized", func(p string) error { return os.WriteFile(p, make([]byte, maxSlotBytes+1), 0o600) }},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"symlink", func(p string) error { return os.Symlink("/etc/hostname", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(slot); err != nil {
				t.Fatal(err)
			}
			if has(ts, "c1", "eth0") {
				t.Error("read as c1's tombstone")
			}
			if err := ts.Prune(func(string) bool { return true }); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(slot); !os.IsNotExist(err) {
				t.Errorf("Prune left it: %v", err)
			}
		})
	}
	legacy := filepath.Join(ts.Dir, "c1")
	if err := os.WriteFile(legacy, []byte("eth0"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.Prune(func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(legacy); !os.IsNotExist(err) {
		t.Errorf("Prune left a tombstone of the layout named by container: %v", err)
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
	if !has(ts, "live", "eth0") || has(ts, "gone", "eth0") {
		t.Error("Prune kept the wrong tombstones")
	}
}

// BenchmarkTombstonesPut is one finished DEL's tombstone on a node whose
// tombstones are at their bound, as on a node with pod churn between GCs.
func BenchmarkTombstonesPut(b *testing.B) {
	ts := &Tombstones{Dir: filepath.Join(b.TempDir(), "deleted")}
	for i := range DefaultMaxTombstones {
		if err := ts.Put(fmt.Sprintf("old%d", i), "eth0"); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		if err := ts.Put(fmt.Sprintf("new%d", i), "eth0"); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestTombstonesKnowTheirBoot: Lookup says whether the DEL finished in
// the boot the reader runs in; an unknown or malformed boot is another.
func TestTombstonesKnowTheirBoot(t *testing.T) {
	const bootA, bootB = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	dir := t.TempDir()
	for _, tc := range []struct {
		name                string
		putBoot, lookupBoot string
		want                bool
	}{
		{"the same boot", bootA, bootA, true},
		{"another boot", bootA, bootB, false},
		{"put with the boot unknown", "", bootA, false},
		{"looked up with the boot unknown", bootA, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := (&Tombstones{Dir: dir, Boot: tc.putBoot}).Put("c1", "eth0"); err != nil {
				t.Fatal(err)
			}
			found, thisBoot := (&Tombstones{Dir: dir, Boot: tc.lookupBoot}).Lookup("c1", "eth0")
			if !found || thisBoot != tc.want {
				t.Errorf("Lookup = %v, %v; want true, %v", found, thisBoot, tc.want)
			}
		})
	}
}

// has is Lookup's first answer: whether the tombstone is there.
func has(t *Tombstones, containerID, ifName string) bool {
	found, _ := t.Lookup(containerID, ifName)
	return found
}
