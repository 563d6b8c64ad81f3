package cniplugin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeHost lays out a host root: /opt/cni/bin with an executable, a
// non-executable file, a directory, and a symlink whose absolute target
// exists only inside the root.
func fakeHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"opt/cni/bin/dir", "usr/lib/cni"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]os.FileMode{"opt/cni/bin/bridge": 0o755, "opt/cni/bin/notexec": 0o644, "usr/lib/cni/linked": 0o755} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("#!"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/usr/lib/cni/linked", filepath.Join(root, "opt/cni/bin/linked")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestFindInRootLooksUpInsideTheRoot(t *testing.T) {
	root := fakeHost(t)
	paths := []string{"/nonexistent", "/opt/cni/bin"}
	for _, tc := range []struct {
		plugin, want string
	}{
		{"bridge", "/opt/cni/bin/bridge"},
		{"linked", "/opt/cni/bin/linked"}, // its absolute target resolves inside root
		{"notexec", ""},
		{"dir", ""},
		{"missing", ""},
		{"../usr/lib/cni/linked", ""},
		{"", ""},
	} {
		got, err := findInRoot(root, tc.plugin, paths)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("findInRoot(%q) = %q, %v; want %q", tc.plugin, got, err, tc.want)
		}
	}
	if _, err := findInRoot(filepath.Join(root, "nope"), "bridge", paths); err == nil || !strings.Contains(err.Error(), "delegate root") {
		t.Errorf("a missing root: %v, want an error naming the delegate root", err)
	}
}

func TestCheckDelegateRootNamesWhatIsMissing(t *testing.T) {
	root := fakeHost(t)
	if err := CheckDelegateRoot(root, []string{"/opt/cni/bin"}); err != nil {
		t.Errorf("a root holding the bin dir: %v", err)
	}
	err := CheckDelegateRoot(root, []string{"/etc/cni/bin"})
	if err == nil || !strings.Contains(err.Error(), "/etc/cni/bin") {
		t.Errorf("a bin dir missing in the root: %v, want an error naming it", err)
	}
	err = CheckDelegateRoot(filepath.Join(root, "absent"), []string{"/opt/cni/bin"})
	if err == nil || !strings.Contains(err.Error(), "hostPID") {
		t.Errorf("an unreachable root: %v, want the fix (hostPID)", err)
	}
}

// TestDelegateRunsChrootedToTheRoot: with a delegate root, the delegate
// sees the root's files at their host paths and starts in its "/".
func TestDelegateRunsChrootedToTheRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	root := fakeHost(t)
	probe := filepath.Join(root, "opt/cni/bin/rootprobe")
	build := exec.Command("go", "build", "-o", probe, "./testdata/rootprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(root, "marker"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &delegateExec{root: root}
	path, err := e.FindInPath("rootprobe", []string{"/opt/cni/bin"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.ExecPlugin(context.Background(), path, nil, nil)
	if err != nil {
		t.Fatalf("ExecPlugin %s: %v", path, err)
	}
	if got := string(out); got != "inside /" {
		t.Errorf("the delegate saw %q, want the root's marker and / as its directory", got)
	}
	// Without a root the same host path means plexus's own tree.
	if _, err := (&delegateExec{}).ExecPlugin(context.Background(), path, nil, nil); err == nil {
		t.Errorf("without a root, %s ran from plexus's own filesystem", path)
	}
}

func TestDelegatesUnderARootGetTheHostsPath(t *testing.T) {
	got := withHostPath([]string{"CNI_COMMAND=ADD", "PATH=/opt/plexus/bin", "CNI_PATH=/opt/cni/bin"})
	want := []string{"CNI_COMMAND=ADD", "CNI_PATH=/opt/cni/bin", hostPATH}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("environ %q, want %q", got, want)
	}
	if got := withHostPath([]string{"CNI_COMMAND=DEL"}); len(got) != 2 || got[1] != hostPATH {
		t.Errorf("without PATH: %q, want the host's added", got)
	}
}

// BenchmarkDelegateRoot: one delegate exec (the loopback plugin's
// VERSION) as plexus runs delegates, in its own filesystem and chrooted
// to the host's root through /proc/PID/root, as plexusd in a pod does.
func BenchmarkDelegateRoot(b *testing.B) {
	bin := os.Getenv("PLEXUS_BIN")
	if bin == "" || os.Geteuid() != 0 {
		b.Skip("needs root and PLEXUS_BIN (make build's bin/)")
	}
	abs, err := filepath.Abs(filepath.Join(bin, "loopback"))
	if err != nil {
		b.Fatal(err)
	}
	env := []string{"CNI_COMMAND=VERSION", "PATH=/usr/bin:/bin"}
	for _, tc := range []struct{ name, root string }{
		{"own", ""},
		{"chroot", fmt.Sprintf("/proc/%d/root", os.Getpid())},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := &delegateExec{root: tc.root}
			for b.Loop() {
				if _, err := e.ExecPlugin(context.Background(), abs, []byte(`{"cniVersion":"1.0.0"}`), env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
