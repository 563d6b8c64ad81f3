package record

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
