package cri

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestContainerdDirsFrom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		info    map[string]string
		want    CNIDirs
		wantErr string
	}{
		{
			name: "containerd 1.x names one binDir",
			info: map[string]string{"config": `{"cni":{"binDir":"/opt/cni/bin","confDir":"/etc/cni/net.d","maxConfNum":1}}`},
			want: CNIDirs{ConfDir: "/etc/cni/net.d", BinDirs: []string{"/opt/cni/bin"}},
		},
		{
			name: "containerd 2.x names binDirs",
			info: map[string]string{"config": `{"cni":{"binDirs":["/var/lib/rancher/k3s/data/cni","/opt/cni/bin"],"confDir":"/var/lib/rancher/k3s/agent/etc/cni/net.d"}}`},
			want: CNIDirs{ConfDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d", BinDirs: []string{"/var/lib/rancher/k3s/data/cni", "/opt/cni/bin"}},
		},
		{name: "no config in the status", info: map[string]string{"status": "{}"}, wantErr: `no "config"`},
		{name: "config that is not JSON", info: map[string]string{"config": "cni"}, wantErr: "decoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := containerdDirsFrom(tc.info)
			checkDirs(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func checkDirs(t *testing.T, got CNIDirs, err error, want CNIDirs, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// crioConfig is the network table of CRI-O's GET /config, as it encodes
// its configuration.
const crioConfig = `
[crio]
  root = "/var/lib/containers/storage"
  [crio.network]
    network_dir = "/etc/kubernetes/cni/net.d/"
    plugin_dirs = ["/var/lib/cni/bin", "/usr/libexec/cni"]
`

func TestCrioDirsFrom(t *testing.T) {
	got, err := crioDirsFrom([]byte(crioConfig))
	checkDirs(t, got, err, CNIDirs{ConfDir: "/etc/kubernetes/cni/net.d/", BinDirs: []string{"/var/lib/cni/bin", "/usr/libexec/cni"}}, "")
	_, err = crioDirsFrom([]byte("[crio\n"))
	checkDirs(t, CNIDirs{}, err, CNIDirs{}, "decoding its config")
}

func TestCheckCleansAndRefusesRelativeOrMissingDirs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      CNIDirs
		want    CNIDirs
		wantErr string
	}{
		{name: "trailing slashes are cleaned", in: CNIDirs{ConfDir: "/etc/cni/net.d/", BinDirs: []string{"/opt/cni/bin/"}}, want: CNIDirs{ConfDir: "/etc/cni/net.d", BinDirs: []string{"/opt/cni/bin"}}},
		{name: "a relative dir is refused", in: CNIDirs{ConfDir: "net.d", BinDirs: []string{"/opt/cni/bin"}}, wantErr: `relative CNI directory "net.d"`},
		{name: "no bin dir is refused", in: CNIDirs{ConfDir: "/etc/cni/net.d"}, wantErr: "no CNI conf dir or bin dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.in
			err := d.check()
			checkDirs(t, d, err, tc.want, tc.wantErr)
		})
	}
}

// dirsRuntime answers Version as name and the verbose Status with info.
type dirsRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	name string
	info map[string]string
}

func (f *dirsRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: f.name, RuntimeVersion: "9.9"}, nil
}

func (f *dirsRuntime) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if !req.GetVerbose() {
		return &runtimeapi.StatusResponse{}, nil
	}
	return &runtimeapi.StatusResponse{Info: f.info}, nil
}

func TestCNIDirsAsksTheRuntimeItIs(t *testing.T) {
	c := serve(t, &dirsRuntime{name: "containerd", info: map[string]string{"config": `{"cni":{"binDir":"/opt/cni/bin/","confDir":"/etc/cni/net.d"}}`}})
	got, err := c.CNIDirs(context.Background())
	checkDirs(t, got, err, CNIDirs{Runtime: "containerd 9.9", ConfDir: "/etc/cni/net.d", BinDirs: []string{"/opt/cni/bin"}}, "")

	c = serve(t, &dirsRuntime{name: "pouch"})
	_, err = c.CNIDirs(context.Background())
	checkDirs(t, CNIDirs{}, err, CNIDirs{}, "runtime pouch 9.9 at ")
}

func TestCrioDirsReadsTheConfigEndpoint(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "crio.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(crioConfig)) })
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	got, err := crioDirs(context.Background(), "", sock)
	checkDirs(t, got, err, CNIDirs{ConfDir: "/etc/kubernetes/cni/net.d/", BinDirs: []string{"/var/lib/cni/bin", "/usr/libexec/cni"}}, "")
	_, err = crioDirs(context.Background(), "", filepath.Join(t.TempDir(), "none.sock"))
	checkDirs(t, CNIDirs{}, err, CNIDirs{}, "GET /config")
}
