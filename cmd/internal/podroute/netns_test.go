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
