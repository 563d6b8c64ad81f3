package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
)

// must fails the benchmark on err.
func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// shimBinary is the shim as make build builds it: $PLEXUS_BIN's, or a
// static build of this package.
func shimBinary(b *testing.B) string {
	if dir := os.Getenv("PLEXUS_BIN"); dir != "" {
		return filepath.Join(dir, "plexus-shim")
	}
	bin := filepath.Join(b.TempDir(), "plexus-shim")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkShimCall: one CNI call through a thick-mode forwarder, from exec
// to exit, against plexusd's socket server with a handler that answers at
// once: what forwarding adds to every call in thick mode, beside the start
// of a process that only answers VERSION.
func BenchmarkShimCall(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "plexusd.sock")
	ln, err := daemon.Listen(sock)
	must(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	result := []byte(`{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}`)
	srv := &daemon.Server{Handler: func(context.Context, *daemon.Call) *daemon.Reply {
		return &daemon.Reply{Stdout: result}
	}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		must(b, <-done)
	})
	conf := []byte(`{"cniVersion":"1.0.0","name":"plexus","type":"plexus-shim","clusterNetwork":"/etc/cni/net.d/default.conf","daemonSocket":"` + sock + `"}`)
	bin := shimBinary(b)
	for _, command := range []string{"ADD", "VERSION"} {
		b.Run("plexus-shim/"+command, func(b *testing.B) {
			want := result
			if command == "VERSION" {
				want = []byte(`"supportedVersions"`)
			}
			for b.Loop() {
				shimCall(b, bin, command, conf, want)
			}
		})
	}
}

// shimCall runs one call as a runtime does and checks its output.
func shimCall(b *testing.B, bin, command string, conf, want []byte) {
	cmd := exec.Command(bin)
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=bench", "CNI_NETNS=/var/run/netns/bench", "CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(bin), "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=bench"}
	cmd.Stdin = bytes.NewReader(conf)
	out, err := cmd.Output()
	if err != nil || !bytes.Contains(out, want) {
		b.Fatalf("%s %s: %v: %s", bin, command, err, out)
	}
}
