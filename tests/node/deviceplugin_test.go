package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/plexus-cni/plexus/tests/harness"
)

// testDevicePlugin is a device plugin speaking the real v1beta1 API to the
// node's kubelet: it registers on kubelet's device-plugins socket and
// advertises one device per host link it created (a veth end named by
// the device ID), and writes each device's device-info file (device-info
// spec s4.1) under its own root directory.
type testDevicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	ids      []string
	infoDir  string
	server   *grpc.Server
	stop     chan struct{}
	mu       sync.Mutex
	allocs   [][]string // device IDs of each Allocate container request
}

// startDevicePlugin creates a veth pair per device ("<id>" for the pod,
// "<id>h" on the host), serves the plugin on a socket beside kubelet's and
// registers it; everything goes when t ends.
func startDevicePlugin(t *testing.T, n *Node, resource, infoDir string, ids ...string) *testDevicePlugin {
	t.Helper()
	for i, id := range ids {
		la := netlink.NewLinkAttrs()
		la.Name = id
		harness.Must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: id + "h"}))
		t.Cleanup(func() { deleteLink(t, id) })
		info := fmt.Sprintf(`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:00:1%d.0"}}`, i)
		dp := filepath.Join(infoDir, "dp", strings.ReplaceAll(resource, "/", "-")+"-"+id+"-device.json")
		harness.Must(t, os.MkdirAll(filepath.Dir(dp), 0o755))
		harness.Must(t, os.WriteFile(dp, []byte(info), 0o644))
	}
	// kubelet's device manager serves at a fixed path, not under its
	// root directory (pluginapi.KubeletSocket); host.go restores it.
	dir := pluginapi.DevicePluginPath
	sock := filepath.Join(dir, "plexus-test.sock")
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	harness.Must(t, err)
	p := &testDevicePlugin{resource: resource, ids: ids, infoDir: infoDir, server: grpc.NewServer(), stop: make(chan struct{})}
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(lis) }()
	t.Cleanup(func() {
		close(p.stop)
		p.server.Stop()
		// s4.1.1: the device plugin deletes its files when it stops.
		_ = os.RemoveAll(filepath.Join(infoDir, "dp"))
	})
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	harness.Must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(sock), ResourceName: resource,
	})
	harness.Must(t, err)
	n.waitAllocatable(resource, len(ids))
	return p
}

func deleteLink(t *testing.T, name string) {
	if l, err := netlink.LinkByName(name); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			t.Errorf("delete test device link %s: %v", name, err)
		}
	}
}

func (p *testDevicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *testDevicePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	resp := &pluginapi.ListAndWatchResponse{}
	for _, id := range p.ids {
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	if err := s.Send(resp); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-s.Context().Done():
	}
	return nil
}

// Allocate makes nothing available inside the container: the device is a
// network link, which the CNI delegate moves into the pod.
func (p *testDevicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range req.ContainerRequests {
		p.allocs = append(p.allocs, c.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return resp, nil
}

// waitAllocatable waits until the node's status in the API advertises
// count devices of resource: kubelet admits a pod against that status.
func (n *Node) waitAllocatable(resource string, count int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	for {
		node, err := n.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			q := node.Status.Allocatable[corev1.ResourceName(resource)]
			if q.Value() == int64(count) {
				return
			}
		}
		if ctx.Err() != nil {
			n.t.Fatalf("node %s does not advertise %d %s within %s (%v)", n.Name, count, resource, readyTimeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// devhostCall is one line of devhost's log.
type devhostCall struct {
	Command         string          `json:"command"`
	IfName          string          `json:"ifName"`
	ConfigDeviceID  string          `json:"configDeviceID"`
	RuntimeDeviceID string          `json:"runtimeDeviceID"`
	DeviceInfoFile  string          `json:"deviceInfoFile"`
	DeviceInfo      json.RawMessage `json:"deviceInfo"`
}

func readDevhostLog(t *testing.T, path string) []devhostCall {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	harness.Must(t, err)
	var out []devhostCall
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c devhostCall
		harness.Must(t, json.Unmarshal([]byte(line), &c))
		out = append(out, c)
	}
	return out
}
