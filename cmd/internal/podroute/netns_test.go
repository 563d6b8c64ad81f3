package podroute

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestCheckNetNSRefusesOnlyWhatIsNotANamespace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, ok := range map[string]bool{
		"/proc/self/ns/net":                true,
		filepath.Join(t.TempDir(), "gone"): true, // the delegates' to report
		file:                               false,
		t.TempDir():                        false,
	} {
		if _, err := (Netlink{}).CheckNetNS(path); (err == nil) != ok {
			t.Errorf("CheckNetNS(%s) = %v, want ok=%v", path, err, ok)
		}
	}
}

func TestCheckNetNSUnderTheHostRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, ok := range map[string]bool{
		"/proc/self/ns/net": true, // a runtime's /proc/PID/ns/net: this process's /proc
		"/file":             false,
		"/gone":             true,
	} {
		if _, err := (Netlink{Root: root}).CheckNetNS(path); (err == nil) != ok {
			t.Errorf("CheckNetNS(%s) under %s = %v, want ok=%v", path, root, err, ok)
		}
	}
}

// TestCheckNetNSTellsThisProcesssNamespace: own is true for this process's
// network namespace however the path reaches it, under the host root as
// the delegates resolve it, and false for another namespace.
func TestCheckNetNSTellsThisProcesssNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a new network namespace and a bind mount need root")
	}
	root := t.TempDir()
	bound := filepath.Join(root, "run/netns/own")
	if err := os.MkdirAll(filepath.Dir(bound), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bound, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", bound, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting this process's namespace: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	other := otherNetNS(t)
	tests := []struct {
		name string
		n    Netlink
		path string
		own  bool
	}{
		{"this process's, by /proc", Netlink{}, "/proc/self/ns/net", true},
		{"this process's, by /proc under the root", Netlink{Root: root}, "/proc/self/ns/net", true},
		{"this process's, bind-mounted under the root", Netlink{Root: root}, "/run/netns/own", true},
		{"another", Netlink{}, other, false},
		{"another under the root", Netlink{Root: root}, other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own, err := tt.n.CheckNetNS(tt.path)
			if err != nil || own != tt.own {
				t.Errorf("CheckNetNS(%s) = %v, %v; want own=%v", tt.path, own, err, tt.own)
			}
		})
	}
}

// otherNetNS is a path to a new network namespace, alive for the test.
func otherNetNS(t *testing.T) string {
	t.Helper()
	// Unlocked only once back: a thread left in the new namespace ends
	// with the test's goroutine instead of serving other tests.
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.New() // switches this thread into it
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatalf("returning to the test's namespace: %v", err)
	}
	runtime.UnlockOSThread()
	t.Cleanup(func() { h.Close() })
	return "/proc/self/fd/" + strconv.Itoa(int(h))
}
