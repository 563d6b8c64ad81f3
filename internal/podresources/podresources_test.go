package podresources

import (
	"context"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/plexus-cni/plexus/core/pipeline"
)

// fakeKubelet serves the pod-resources API on a unix socket; withoutGet
// answers Get as an older kubelet does (Unimplemented).
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	withoutGet bool
	pods       []*podresourcesv1.PodResources
}

func (k *fakeKubelet) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	if k.withoutGet {
		return k.UnimplementedPodResourcesListerServer.Get(context.Background(), req)
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
	return []*podresourcesv1.PodResources{
		{Namespace: "demo", Name: "other", Containers: []*podresourcesv1.ContainerResources{{Name: "c", Devices: []*podresourcesv1.ContainerDevices{dev("vendor.example/netdev", "vf9")}}}},
		{Namespace: "demo", Name: "web", Containers: []*podresourcesv1.ContainerResources{
			{Name: "a", Devices: []*podresourcesv1.ContainerDevices{dev("vendor.example/netdev", "vf2"), dev("gpu.example/gpu", "g0")}},
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
		want := pipeline.PodDevices{"vendor.example/netdev": {"vf2", "vf1"}, "gpu.example/gpu": {"g0"}}
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
