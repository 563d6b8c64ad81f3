package devinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPathsFollowTheSpec(t *testing.T) {
	f := Files{Dir: "/d"}
	dp, err := f.DevicePluginFile("vendor.example/netdev", "0000:18:02.5")
	if err != nil || dp != "/d/dp/vendor.example-netdev-0000:18:02.5-device.json" {
		t.Fatalf("device plugin file %q, %v", dp, err)
	}
	cni, err := f.CNIFile("abc123", "net1")
	if err != nil || cni != "/d/cni/abc123-net1-device.json" {
		t.Fatalf("CNI file %q, %v", cni, err)
	}
	if dp, _ := (Files{}).DevicePluginFile("a.b/c", "x"); !strings.HasPrefix(dp, DefaultDir+"/dp/") {
		t.Fatalf("default root not used: %s", dp)
	}
}

func TestNothingUnvalidatedBecomesAPath(t *testing.T) {
	f := Files{Dir: "/d"}
	bad := []struct{ resource, device string }{
		{"../../etc", "x"},
		{"vendor.example/../x", "x"},
		{"netdev", "x"},
		{"vendor.example/netdev", "../x"},
		{"vendor.example/netdev", "a/b"},
		{"vendor.example/netdev", ".hidden"},
	}
	for _, b := range bad {
		if p, err := f.DevicePluginFile(b.resource, b.device); err == nil {
			t.Errorf("%q %q became %s", b.resource, b.device, p)
		}
	}
	for _, ifName := range []string{"../x", "a/b", ""} {
		if p, err := f.CNIFile("abc", ifName); err == nil {
			t.Errorf("interface %q became %s", ifName, p)
		}
	}
	if p, err := f.CNIFile("../abc", "net1"); err == nil {
		t.Errorf("container ID became %s", p)
	}
}

const info = `{"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:18:02.5"}}`

func TestPrepareCopiesReadsAndRemoves(t *testing.T) {
	dir := t.TempDir()
	f := Files{Dir: dir}
	dp, _ := f.DevicePluginFile("vendor.example/netdev", "dev0")
	cni, _ := f.CNIFile("c1", "net1")
	if copied, err := Prepare(dp, cni); err != nil || copied {
		t.Fatalf("without a device plugin file: copied %v, %v", copied, err)
	}
	if got, err := Read(cni); err != nil || got != nil {
		t.Fatalf("no file: %s, %v", got, err)
	}
	if err := os.MkdirAll(filepath.Dir(dp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dp, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	if copied, err := Prepare(dp, cni); err != nil || !copied {
		t.Fatalf("copied %v, %v", copied, err)
	}
	got, err := Read(cni)
	if err != nil || string(got) != `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5"}}` {
		t.Fatalf("read %s, %v", got, err)
	}
	if err := Remove(cni); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cni); !os.IsNotExist(err) {
		t.Fatalf("CNI file still there: %v", err)
	}
	if err := Remove(cni); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}

func TestInvalidDeviceInfoIsRefused(t *testing.T) {
	for _, s := range []string{`[]`, `{"version":"1.1.0"}`, `{"type":"pci"}`, `nope`} {
		if _, err := Validate([]byte(s)); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(`{"type":"pci","version":"1.1.0","x":"`+strings.Repeat("a", maxFile)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
}
