package podresources

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// fakeKubelet serves the pod-resources API on a unix socket; withoutGet
// answers Get as an older kubelet does (Unimplemented).
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	withoutGet bool
	// getErr, when set, is Get's answer.
	getErr error
	pods   []*podresourcesv1.PodResources
}

func (k *fakeKubelet) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	if k.withoutGet {
		return k.UnimplementedPodResourcesListerServer.Get(context.Background(), req)
	}
	if k.getErr != nil {
		return nil, k.getErr
	}
	for _, p := range k.pods {
		if p.Namespace == req.PodNamespace && p.Name == req.PodName {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: p}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s/%s not found", req.PodNamespace, req.PodName)
}

func (k *fakeKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

func serve(t *testing.T, k *fakeKubelet) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(s, k)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return sock
}

func pods() []*podresourcesv1.PodResources {
	dev := func(res string, ids ...string) *podresourcesv1.ContainerDevices {
		return &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: ids}
	}
	numa := &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: 1}}}
	return []*podresourcesv1.PodResources{
		{Namespace: "demo", Name: "other", Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{dev("vendor.example/netdev", "vf9")}}}},
		{Namespace: "demo", Name: "web", Containers: []*podresourcesv1.ContainerResources{
			// Fields plexus skips around the devices: packed CPU IDs,
			// memory, topology, DRA claims.
			{Name: "a", CpuIds: []int64{2, 3, 70000}, Memory: []*podresourcesv1.ContainerMemory{{MemoryType: "memory", Size: 1 << 30, Topology: numa}},
				Devices:          []*podresourcesv1.ContainerDevices{dev("vendor.example/netdev", "vf2"), dev("gpu.example/gpu", "g0"), {ResourceName: "vendor.example/numa", DeviceIds: []string{"n0"}, Topology: numa}},
				DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "claim", ClaimNamespace: "demo", ClaimResources: []*podresourcesv1.ClaimResource{{DriverName: "net.example", PoolName: "p", DeviceName: "d", CdiDevices: []*podresourcesv1.CDIDevice{{Name: "vendor/net=d"}}}}}}},
			{Name: "b", Devices: []*podresourcesv1.ContainerDevices{dev("vendor.example/netdev", "vf1")}},
		}},
	}
}

func TestPodDevicesGathersEveryContainersDevicesWithOneCall(t *testing.T) {
	for _, withoutGet := range []bool{false, true} {
		var calls []string
		c := &Client{Socket: serve(t, &fakeKubelet{withoutGet: withoutGet, pods: pods()}), OnCall: func(m string) { calls = append(calls, m) }}
		got, err := c.PodDevices(context.Background(), "demo", "web")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"vendor.example/netdev": {"vf2", "vf1"}, "gpu.example/gpu": {"g0"}, "vendor.example/numa": {"n0"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("withoutGet %v: %v, want %v", withoutGet, got, want)
		}
		wantCalls := []string{"Get"}
		if withoutGet {
			wantCalls = []string{"Get", "List"}
		}
		if !reflect.DeepEqual(calls, wantCalls) {
			t.Errorf("withoutGet %v: calls %v, want %v", withoutGet, calls, wantCalls)
		}
	}
}

func TestPodDevicesErrorsNameTheSocketAndPod(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubelet.sock")
	_, err := (&Client{Socket: missing}).PodDevices(context.Background(), "demo", "web")
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing socket: %v", err)
	}
	for _, withoutGet := range []bool{false, true} {
		c := &Client{Socket: serve(t, &fakeKubelet{withoutGet: withoutGet, pods: pods()})}
		_, err = c.PodDevices(context.Background(), "demo", "gone")
		if err == nil || !strings.Contains(err.Error(), "demo/gone") {
			t.Errorf("withoutGet %v: unknown pod: %v", withoutGet, err)
		}
	}
}

// TestGetAnswersDecideWhetherListIsAsked: kubelet refusing Get (older
// kubelets: Unimplemented, or Unknown "Get method disabled") makes plexus
// ask List; a kubelet that is unavailable or too slow is not asked again.
func TestGetAnswersDecideWhetherListIsAsked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		getErr    error
		wantCalls []string
		wantErr   string
	}{
		{"disabled", status.Error(codes.Unknown, "Get method disabled"), []string{"Get", "List"}, ""},
		{"permission", status.Error(codes.PermissionDenied, "no"), []string{"Get", "List"}, ""},
		{"unavailable", status.Error(codes.Unavailable, "kubelet is shutting down"), []string{"Get"}, "code Unavailable: kubelet is shutting down"},
		{"deadline", status.Error(codes.DeadlineExceeded, "too slow"), []string{"Get"}, "code DeadlineExceeded: too slow"},
		{"message percent-encoded on the wire", status.Error(codes.Unavailable, "100% busy: é"), []string{"Get"}, "code Unavailable: 100% busy: é"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			c := &Client{Socket: serve(t, &fakeKubelet{getErr: tc.getErr, pods: pods()}), OnCall: func(m string) { calls = append(calls, m) }}
			got, err := c.PodDevices(context.Background(), "demo", "web")
			if !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("calls %v, want %v", calls, tc.wantCalls)
			}
			if tc.wantErr == "" {
				if err != nil || len(got["vendor.example/netdev"]) != 2 {
					t.Errorf("got %v, %v; want List's devices", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), c.Socket) {
				t.Errorf("error %v, want one naming %q and the socket", err, tc.wantErr)
			}
		})
	}
}

// TestNotAGRPCServerFailsClearly: a socket that answers HTTP/1.1 (a wrong
// podResourcesSocket) fails the call, naming the socket, without hanging.
func TestNotAGRPCServerFailsClearly(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "http.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := &Client{Socket: sock, Timeout: 5 * time.Second}
	_, err = c.PodDevices(context.Background(), "demo", "web")
	if err == nil || !strings.Contains(err.Error(), sock) || strings.Contains(err.Error(), "deadline") {
		t.Errorf("error %v, want a prompt one naming %s", err, sock)
	}
}

// TestSilentKubeletTimesOut: a socket that accepts but never answers fails
// the call at the client's timeout, without asking List.
func TestSilentKubeletTimesOut(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	var calls []string
	c := &Client{Socket: sock, Timeout: 200 * time.Millisecond, OnCall: func(m string) { calls = append(calls, m) }}
	start := time.Now()
	_, err = c.PodDevices(context.Background(), "demo", "web")
	if err == nil || !strings.Contains(err.Error(), "DeadlineExceeded") || !strings.Contains(err.Error(), sock) {
		t.Errorf("error %v, want a deadline naming %s", err, sock)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %v with a 200ms timeout", elapsed)
	}
	if !reflect.DeepEqual(calls, []string{"Get"}) {
		t.Errorf("calls %v, want Get alone", calls)
	}
}

// TestAnswerOverTheBoundFails: an answer over maxMessage is refused rather
// than read.
func TestAnswerOverTheBoundFails(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	ids := make([]string, maxMessage>>20+1)
	for i := range ids {
		ids[i] = big
	}
	k := &fakeKubelet{pods: []*podresourcesv1.PodResources{{Namespace: "demo", Name: "web", Containers: []*podresourcesv1.ContainerResources{
		{Name: "c", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "vendor.example/netdev", DeviceIds: ids}}},
	}}}}
	c := &Client{Socket: serve(t, k)}
	_, err := c.PodDevices(context.Background(), "demo", "web")
	if err == nil || !strings.Contains(err.Error(), "ResourceExhausted") || !strings.Contains(err.Error(), c.Socket) {
		t.Errorf("error %v, want ResourceExhausted naming the socket", err)
	}
}
