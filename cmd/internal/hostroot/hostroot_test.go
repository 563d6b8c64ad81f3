package hostroot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostTree is a root whose var/run is an absolute link to /run, as on a
// host: resolved outside the root it would name this process's /run.
func hostTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"run/netns", "var"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/run", filepath.Join(root, "var", "run")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "run", "netns", "cni-1"), []byte("ns"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestOpenResolvesLinksInsideTheRoot(t *testing.T) {
	root := hostTree(t)
	f, err := Open(root, "/var/run/netns/cni-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 2)
	if _, err := f.Read(buf); err != nil || string(buf) != "ns" {
		t.Fatalf("read %q, %v: want the root's file", buf, err)
	}
	if _, err := Open(root, "/var/run/netns/../../../../etc/passwd", 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a path climbing out of the root: err = %v, want not found inside the root", err)
	}
	if _, err := Open(root, "run/netns/cni-1", 0); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative path: err = %v", err)
	}
}

func TestExists(t *testing.T) {
	root := hostTree(t)
	for p, want := range map[string]bool{"/var/run/netns/cni-1": true, "/run/netns/cni-2": false} {
		got, err := Exists(root, p)
		if err != nil || got != want {
			t.Errorf("Exists(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
}

func TestDialUnixInsideTheRoot(t *testing.T) {
	root := hostTree(t)
	// A socket path far beyond a socket address's 108 bytes.
	dir := filepath.Join(root, "run", strings.Repeat("d", 100))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Bound through the directory's descriptor, as the address is too long.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/s.sock", d.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}
	}()
	c, err := DialUnix(context.Background(), root, "/var/run/"+strings.Repeat("d", 100)+"/s.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q, %v", buf, err)
	}
}
