package bench

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/internal/daemon"
	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkShimCall: one CNI call through a thick-mode forwarder, from exec
// to exit, against plexusd's socket server with a handler that answers at
// once: what forwarding adds to every call in thick mode, beside the start
// of a process that only answers VERSION.
func BenchmarkShimCall(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "plexusd.sock")
	ln, err := daemon.Listen(sock)
	harness.Must(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	result := []byte(`{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}`)
	srv := &daemon.Server{Handler: func(context.Context, *daemon.Call) *daemon.Reply {
		return &daemon.Reply{Stdout: result}
	}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	b.Cleanup(func() {
		cancel()
		harness.Must(b, <-done)
	})
	conf := []byte(`{"cniVersion":"1.0.0","name":"plexus","type":"plexus-shim","clusterNetwork":"/etc/cni/net.d/default.conf","daemonSocket":"` + sock + `"}`)
	bin := filepath.Join(harness.BinDir, "plexus-shim")
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
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=bench", "CNI_NETNS=/var/run/netns/bench", "CNI_IFNAME=eth0", "CNI_PATH=" + harness.BinDir, "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=bench"}
	cmd.Stdin = bytes.NewReader(conf)
	out, err := cmd.Output()
	if err != nil || !bytes.Contains(out, want) {
		b.Fatalf("%s %s: %v: %s", bin, command, err, out)
	}
}
