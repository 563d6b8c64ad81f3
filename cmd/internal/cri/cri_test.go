package cri

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNetNSFrom(t *testing.T) {
	info := `{"pid":7,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1"}]}}}`
	resp := func(uid string, state runtimeapi.PodSandboxState, info map[string]string) *runtimeapi.PodSandboxStatusResponse {
		return &runtimeapi.PodSandboxStatusResponse{
			Status: &runtimeapi.PodSandboxStatus{Id: "s1", State: state, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}},
			Info:   info,
		}
	}
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	tests := []struct {
		name    string
		resp    *runtimeapi.PodSandboxStatusResponse
		want    string
		wantErr string
		is      error
	}{
		{"containerd's info", resp("u1", ready, map[string]string{"info": info}), "/var/run/netns/cni-1", "", nil},
		{"another pod's sandbox", resp("u2", ready, map[string]string{"info": info}), "", `belongs to pod UID "u2", not "u1"`, nil},
		{"not ready", resp("u1", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, map[string]string{"info": info}), "", "SANDBOX_NOTREADY", ErrNotReady},
		{"no verbose info", resp("u1", ready, nil), "", `no "info"`, nil},
		{"host network", resp("u1", ready, map[string]string{"info": `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}}`}), "", "no network namespace path", nil},
		{"garbled info", resp("u1", ready, map[string]string{"info": `{`}), "", "decoding", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := netnsFrom("s1", "u1", tt.resp)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || (tt.is != nil && !errors.Is(err, tt.is)) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}

// fakeRuntime serves ListPodSandbox from items, or fails with err.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	items []*runtimeapi.PodSandbox
	err   error
	got   *runtimeapi.ListPodSandboxRequest
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.got = req
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: f.items}, nil
}

// serve runs rt on a unix socket and returns a client of it.
func serve(t *testing.T, rt runtimeapi.RuntimeServiceServer) *Client {
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
	c, err := NewInRoot("", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSandboxIDsListsEveryState(t *testing.T) {
	rt := &fakeRuntime{items: []*runtimeapi.PodSandbox{
		{Id: "ready1", State: runtimeapi.PodSandboxState_SANDBOX_READY},
		{Id: "stopped1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
	}}
	c := serve(t, rt)
	ids, err := c.SandboxIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ready1", "stopped1"}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if rt.got.GetFilter() != nil {
		t.Errorf("the request filtered sandboxes: %v", rt.got.GetFilter())
	}
}

func TestSandboxIDsReportsNoAnswerAsAnError(t *testing.T) {
	c := serve(t, &fakeRuntime{err: status.Error(codes.Unavailable, "restarting")})
	if ids, err := c.SandboxIDs(context.Background()); err == nil || ids != nil {
		t.Fatalf("a failing runtime: ids %v err %v, want an error and no list", ids, err)
	}
	// Nobody listening at all.
	gone, err := NewInRoot("", filepath.Join(t.TempDir(), "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if ids, err := gone.SandboxIDs(context.Background()); err == nil || ids != nil {
		t.Fatalf("no runtime: ids %v err %v, want an error and no list", ids, err)
	}
}

// TestNewInRootDialsTheHostsSocket: the socket's host path, through the
// host's /var/run -> /run link, is reached inside the root.
func TestNewInRootDialsTheHostsSocket(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/run", filepath.Join(root, "var", "run")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(root, "run", "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, &fakeRuntime{items: []*runtimeapi.PodSandbox{{Id: "a"}}})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	c, err := NewInRoot(root, "/var/run/cri.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids, err := c.SandboxIDs(context.Background())
	if err != nil || len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("SandboxIDs = %v, %v; want [a] from the socket under the root", ids, err)
	}
}
