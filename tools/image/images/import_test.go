package images

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tools/image/ociimage"
)

// TestImportIntoContainerd imports make image's and make pause-image's
// archives into a containerd of the test's own (socket, root and state in
// a temporary directory; nothing system-wide) the way a node is given
// them, `ctr -n k8s.io images import`, and checks containerd lists them
// under the names make gave them and the digests they were built with.
// Needs root and PLEXUS_E2E=1; run it under the integration lock.
func TestImportIntoContainerd(t *testing.T) {
	if os.Getenv("PLEXUS_E2E") != "1" {
		t.Skip("PLEXUS_E2E is not 1: this test starts containerd (root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	bin := plexusBin(t)
	archives := map[string]string{ // name -> archive
		imageName(t, "IMAGE"):       filepath.Join(bin, "plexus-image.tar"),
		imageName(t, "PAUSE_IMAGE"): filepath.Join(bin, "pause-image.tar"),
	}
	want := map[string]string{} // name -> manifest digest
	for name, archive := range archives {
		if _, err := os.Stat(archive); err != nil {
			t.Fatalf("%v: make image pause-image writes it (make test-image does)", err)
		}
		imgs, err := ociimage.ReadOCI(archive, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		img := imgs[name]
		if img == nil || len(imgs) != 1 {
			t.Fatalf("%s holds %d images, none named %s", archive, len(imgs), name)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		want[name] = d.String()
	}

	ctr := startContainerd(t)
	for name, archive := range archives {
		out, err := ctr("-n", "k8s.io", "images", "import", archive)
		if err != nil {
			t.Fatalf("import %s: %v\n%s", archive, err, out)
		}
		// ctr unpacks for the default snapshotter as it imports: the
		// image is ready to run, not only stored.
		if !strings.Contains(out, "unpacking "+name) || !strings.Contains(out, "done") {
			t.Errorf("import %s: output %q does not say %s was unpacked", archive, out, name)
		}
	}
	out, err := ctr("-n", "k8s.io", "images", "ls")
	if err != nil {
		t.Fatalf("images ls: %v\n%s", err, out)
	}
	got := map[string]string{} // name -> digest
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		// REF TYPE DIGEST SIZE PLATFORMS LABELS
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] != "REF" {
			got[f[0]] = f[2]
		}
	}
	for name, digest := range want {
		if got[name] != digest {
			t.Errorf("containerd lists %s with digest %q, want %s (all: %v)", name, got[name], digest, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("containerd lists %v, want only %v", got, want)
	}
}

// startContainerd starts containerd with its socket, root, state and opt
// directories in a temporary directory and the CRI plugin off, stops it by
// its PID when the test ends, and returns a ctr for its socket.
func startContainerd(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd: %v (apt-get install containerd)", err)
	}
	ctrPath, err := exec.LookPath("ctr")
	if err != nil {
		t.Fatalf("ctr: %v (apt-get install containerd)", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, filepath.Join(dir, "opt"))
	configFile := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "containerd.log")
	logw, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer logw.Close()
	cmd := exec.Command(containerd, "--config", configFile)
	cmd.Stdout, cmd.Stderr = logw, logw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { stopContainerd(t, cmd.Process, exited, dir, logFile) })

	ctr := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, ctrPath, append([]string{"--address", sock}, args...)...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	// Readiness, not a timed check: wait until it answers.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := ctr("version")
		if err == nil {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("containerd exited (%v):\n%s", err, readTail(logFile))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd never answered on %s: %v %s\n%s", sock, err, out, readTail(logFile))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ctr
}

// stopContainerd stops containerd by its PID and checks it left no mount
// below dir.
func stopContainerd(t *testing.T, p *os.Process, exited chan error, dir, logFile string) {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("stop containerd (pid %d): %v", p.Pid, err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Errorf("containerd (pid %d) did not stop on SIGTERM; killing it", p.Pid)
		p.Kill()
		<-exited
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			t.Errorf("containerd left %s mounted", f[4])
			syscall.Unmount(f[4], syscall.MNT_DETACH)
		}
	}
	if t.Failed() {
		t.Logf("containerd's log:\n%s", readTail(logFile))
	}
}

func readTail(file string) string {
	b, _ := os.ReadFile(file)
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
