package plexusd

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plexus-cni/plexus/core/config"
)

func TestNodePathsFromFlagsReplaceTheConfigs(t *testing.T) {
	conf := &config.Config{CallSettings: config.CallSettings{ConfDir: "/etc/cni/net.d", BinDir: "/opt/cni/bin"}, CRISocket: "/run/containerd/containerd.sock"}
	Options{DefaultConfDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d", BinDir: "/x"}.nodePaths(conf)
	if conf.ConfDir != "/etc/cni/net.d" || conf.BinDir != "/opt/cni/bin" || conf.CRISocket != "/run/containerd/containerd.sock" {
		t.Fatalf("flags left at their defaults changed the config: %+v", conf)
	}
	Options{DefaultConfDir: "/k3s/net.d", ConfDirSet: true, BinDir: "/k3s/bin", BinDirSet: true, CRISocket: "/run/k3s/containerd/containerd.sock"}.nodePaths(conf)
	if conf.ConfDir != "/k3s/net.d" || conf.BinDir != "/k3s/bin" || conf.CRISocket != "/run/k3s/containerd/containerd.sock" {
		t.Fatalf("flags given did not replace the config's paths: %+v", conf)
	}
}

// dirsCRI is a containerd whose verbose CRI status names confDir and binDir.
type dirsCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	config string
}

func (dirsCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.7.0"}, nil
}

func (f dirsCRI) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Info: map[string]string{"config": f.config}}, nil
}

func serveCRI(t *testing.T, rt runtimeapi.RuntimeServiceServer) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return sock
}

func TestCheckRuntimeDirs(t *testing.T) {
	k3s := `{"cni":{"binDirs":["/var/lib/rancher/k3s/data/cni"],"confDir":"/var/lib/rancher/k3s/agent/etc/cni/net.d"}}`
	for _, tc := range []struct {
		name     string
		runtime  runtimeapi.RuntimeServiceServer
		confDir  string
		binDir   string
		binaries []string
		wantErr  []string
	}{
		{name: "the runtime's dirs pass", runtime: dirsCRI{config: k3s}, confDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d/", binDir: "/var/lib/rancher/k3s/data/cni", binaries: []string{"plexus-shim"}},
		{
			name: "a conf dir the runtime does not read is refused", runtime: dirsCRI{config: k3s}, confDir: "/etc/cni/net.d", binDir: "/var/lib/rancher/k3s/data/cni",
			wantErr: []string{"reads CNI configs from /var/lib/rancher/k3s/agent/etc/cni/net.d, not from --cni-conf-dir /etc/cni/net.d", "containerd 1.7.0 at ", distributionsDoc},
		},
		{
			name: "binaries where the runtime does not look are refused", runtime: dirsCRI{config: k3s}, confDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d", binDir: "/opt/cni/bin", binaries: []string{"plexus-shim"},
			wantErr: []string{"finds CNI plugins in [/var/lib/rancher/k3s/data/cni], not in --cni-bin-dir /opt/cni/bin"},
		},
		{name: "a bin dir without binaries to install is not checked", runtime: dirsCRI{config: k3s}, confDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d", binDir: "/opt/cni/bin"},
		{name: "a runtime that cannot tell leaves the dirs unchecked", runtime: runtimeapi.UnimplementedRuntimeServiceServer{}, confDir: "/etc/cni/net.d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Daemon{
				o:    Options{InstallConfig: true, ConfDir: tc.confDir, BinDir: tc.binDir, Binaries: tc.binaries, Log: slog.New(slog.DiscardHandler)},
				conf: &config.Config{CRISocket: serveCRI(t, tc.runtime)},
			}
			defer d.close()
			err := d.checkRuntimeDirs(context.Background())
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestSameDirThroughTheHostRoot(t *testing.T) {
	root := t.TempDir()
	rev := filepath.Join(root, "snap", "1234", "net.d")
	if err := os.MkdirAll(rev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("1234", filepath.Join(root, "snap", "current")); err != nil {
		t.Fatal(err)
	}
	mounted := filepath.Join(root, "snap", "current", "net.d") // as plexusd's mount shows it
	d := &Daemon{o: Options{DelegateRoot: root}}
	if !d.sameDir(mounted, "/snap/1234/net.d") {
		t.Error("the runtime's name of a linked directory is not the same directory")
	}
	if d.sameDir(mounted, "/snap/1234") {
		t.Error("another directory is the same")
	}
	if (&Daemon{}).sameDir(mounted, "/snap/1234/net.d") {
		t.Error("without a host root, other names were compared as directories")
	}
}
