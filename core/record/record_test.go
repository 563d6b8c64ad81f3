package record

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func sample() *Record {
	return &Record{
		ContainerID: "c1",
		Pod:         &Pod{Namespace: "ns", Name: "p"},
		Attachments: []Attachment{
			{Name: "default", Default: true, IfName: "eth0", Config: []byte(`{"name":"d"}`), State: Attached},
			{Name: "ns/a", IfName: "net1", Config: []byte(`{"name":"a"}`), State: Attempted, CNIArgs: [][2]string{{"K", "V"}}},
		},
	}
}

func TestStoreRoundTrip(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "records")}
	if r, err := s.Load("c1"); r != nil || err != nil {
		t.Fatalf("missing record: %v %v", r, err)
	}
	if err := s.Save(sample()); err != nil {
		t.Fatal(err)
	}
	r, err := s.Load("c1")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Attachments) != 2 || r.Attachments[1].State != Attempted || r.Attachments[1].CNIArgs[0][1] != "V" {
		t.Errorf("round trip lost data: %+v", r)
	}
	ids, _ := s.List()
	if len(ids) != 1 || ids[0] != "c1" {
		t.Errorf("List = %v", ids)
	}
	if err := s.Remove("c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("c1"); err != nil {
		t.Fatal("removing twice must succeed:", err)
	}
	left, _ := os.ReadDir(s.Dir)
	if len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

func TestStoreRefusesPathsAsContainerIDs(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	for _, id := range []string{"../x", "a/b", "", ".hidden", string(make([]byte, 300))} {
		r := sample()
		r.ContainerID = id
		if err := s.Save(r); err == nil {
			t.Errorf("Save accepted container ID %q", id)
		}
		if _, err := s.Load(id); err == nil {
			t.Errorf("Load accepted container ID %q", id)
		}
	}
}

func TestLoadCorruptRecords(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	for name, content := range map[string]string{
		"truncated":     `{"version":1,"containerID":"c1","attach`,
		"wrong version": `{"version":9,"containerID":"c1","attachments":[]}`,
		"wrong id":      `{"version":1,"containerID":"c2","attachments":[]}`,
		"bad ifname":    `{"version":1,"containerID":"c1","attachments":[{"ifName":"../x","config":{},"state":"attached"}]}`,
		"bad state":     `{"version":1,"containerID":"c1","attachments":[{"ifName":"eth0","config":{},"state":"weird"}]}`,
	} {
		if err := os.WriteFile(filepath.Join(s.Dir, "c1.json"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load("c1"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

// A directory where a record belongs is unusable, not an I/O error, so DEL
// falls back to libcni's cache; Remove clears it.
func TestDirectoryRecordIsCorrupt(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(s.Dir, "c1.json", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("c1"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a directory record: %v, want ErrCorrupt", err)
	}
	if err := s.Remove("c1"); err != nil {
		t.Fatalf("Remove of a directory record: %v", err)
	}
	if r, err := s.Load("c1"); r != nil || err != nil {
		t.Fatalf("after Remove: %v, %v", r, err)
	}
}

// Each Save appends one line; the last complete line is the record, a torn
// tail (a crash during an append) falls back to the line before, and a
// complete but unreadable last line is corruption.
func TestJournal(t *testing.T) {
	first := sample()
	first.Attachments = first.Attachments[:1]
	line := func(r *Record) string {
		t.Helper()
		s := &Store{Dir: t.TempDir()}
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(s.Dir, "c1.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	l1, l2 := line(first), line(sample())
	tests := []struct {
		name    string
		content string
		want    int // attachments in the loaded record; -1 for ErrCorrupt
	}{
		{"the last line wins", l1 + l2, 2},
		{"a torn tail is ignored", l1 + l2[:len(l2)/2], 1},
		{"a torn first line is corrupt", l1[:len(l1)/2], -1},
		{"a record written in one piece", l2[:len(l2)-1], 2},
		{"a complete bad last line is corrupt", l2 + "{\"version\":1}\n", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir()}
			if err := os.WriteFile(filepath.Join(s.Dir, "c1.json"), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := s.Load("c1")
			if tc.want < 0 {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil || len(r.Attachments) != tc.want {
				t.Fatalf("record %+v, err %v; want %d attachments", r, err, tc.want)
			}
		})
	}
}

func TestSaveAppendsOneLinePerCall(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "records")}
	for i := range 3 {
		r := sample()
		r.Attachments = r.Attachments[:1+i%2]
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, "c1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 3 {
		t.Errorf("%d lines after 3 saves", n)
	}
	if r, err := s.Load("c1"); err != nil || len(r.Attachments) != 1 {
		t.Errorf("Load after 3 saves: %+v, %v", r, err)
	}
}

// A symlink where the record belongs is not followed.
func TestSaveDoesNotFollowSymlinks(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, filepath.Join(s.Dir, "c1.json")); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(sample()); err == nil {
		t.Fatal("Save wrote through a symlink")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("symlink target created: %v", err)
	}
}

func TestLastWriteFollowsSaves(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if _, err := s.LastWrite("c1"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no record: err = %v, want ErrNotExist", err)
	}
	if _, err := s.LastWrite("../x"); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a path as container ID: err = %v, want a refusal", err)
	}
	mustSave(t, s)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(s.Dir, "c1.json"), old, old); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LastWrite("c1"); err != nil || !got.Equal(old) {
		t.Fatalf("LastWrite = %v %v, want %v", got, err, old)
	}
	mustSave(t, s) // an append is a write
	if got, err := s.LastWrite("c1"); err != nil || time.Since(got) > time.Minute {
		t.Fatalf("LastWrite after a save = %v %v, want now", got, err)
	}
}

func mustSave(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Save(sample()); err != nil {
		t.Fatal(err)
	}
}

// TestTrusted: a record is trusted to list libcni's cache only when it
// ends a finished ADD and the store knows the boot that its last save
// carried.
func TestTrusted(t *testing.T) {
	const bootA, bootB = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	dir := t.TempDir()
	finished := sample()
	finished.Attachments[1].State = Attached
	if err := (&Store{Dir: dir, Boot: bootA}).Save(finished); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		boot string
		want bool
	}{
		{"the same boot", bootA, true},
		{"another boot", bootB, false},
		{"the boot unknown", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Store{Dir: dir, Boot: tc.boot}
			r, err := s.Load("c1")
			if err != nil || r == nil {
				t.Fatalf("Load: %v, %v", r, err)
			}
			if got := s.Trusted(r); got != tc.want {
				t.Errorf("Trusted = %v, want %v (record's boot %q)", got, tc.want, r.Boot)
			}
		})
	}
	s := &Store{Dir: dir, Boot: bootA}
	for _, state := range []State{Planned, Attempted} {
		if r := (&Record{ContainerID: "c1", Boot: bootA, Attachments: []Attachment{{State: Attached}, {State: state}}}); s.Trusted(r) {
			t.Errorf("a record with a %s attachment is trusted", state)
		}
	}
}
