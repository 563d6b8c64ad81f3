package podroute

import (
	"os"
	"path/filepath"
	"testing"
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
		if err := (Netlink{}).CheckNetNS(path); (err == nil) != ok {
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
		if err := (Netlink{Root: root}).CheckNetNS(path); (err == nil) != ok {
			t.Errorf("CheckNetNS(%s) under %s = %v, want ok=%v", path, root, err, ok)
		}
	}
}
