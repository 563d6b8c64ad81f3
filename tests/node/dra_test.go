package node

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	drav1 "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

const draDriver = "net.plexus.test"

// testDRADriver is a DRA driver's kubelet plugin speaking the real APIs
// (plugin registration v1 under kubelet's plugins_registry, DRA v1): it
// prepares claims by answering which devices they hold. The devices are
// host links the test creates, named like the devices.
type testDRADriver struct {
	drav1.UnimplementedDRAPluginServer
	registerapi.UnimplementedRegistrationServer
	endpoint   string
	mu         sync.Mutex
	prepared   []string // claim UIDs
	unprepared []string
	registered chan error
}

func (d *testDRADriver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: draDriver, Endpoint: d.endpoint, SupportedVersions: []string{drav1.DRAPluginService}}, nil
}

func (d *testDRADriver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	var err error
	if !s.PluginRegistered {
		err = &registrationError{s.Error}
	}
	select {
	case d.registered <- err:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

type registrationError struct{ msg string }

func (e *registrationError) Error() string { return "kubelet refused the DRA plugin: " + e.msg }

func (d *testDRADriver) NodePrepareResources(_ context.Context, req *drav1.NodePrepareResourcesRequest) (*drav1.NodePrepareResourcesResponse, error) {
	resp := &drav1.NodePrepareResourcesResponse{Claims: map[string]*drav1.NodePrepareResourceResponse{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range req.Claims {
		d.prepared = append(d.prepared, c.Uid)
		// The claim's allocation names the devices; a driver that needs
		// nothing in the container (a network link) just confirms them.
		resp.Claims[c.Uid] = &drav1.NodePrepareResourceResponse{Devices: []*drav1.Device{
			{RequestNames: []string{"nic"}, PoolName: "pool", DeviceName: "pxdr0"},
			{RequestNames: []string{"nic"}, PoolName: "pool", DeviceName: "pxdr1"},
		}}
	}
	return resp, nil
}

func (d *testDRADriver) NodeUnprepareResources(_ context.Context, req *drav1.NodeUnprepareResourcesRequest) (*drav1.NodeUnprepareResourcesResponse, error) {
	resp := &drav1.NodeUnprepareResourcesResponse{Claims: map[string]*drav1.NodeUnprepareResourceResponse{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range req.Claims {
		d.unprepared = append(d.unprepared, c.Uid)
		resp.Claims[c.Uid] = &drav1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

// startDRADriver serves the driver and its registration under kubelet's
// root directory and waits until kubelet has registered it.
func startDRADriver(t *testing.T, n *Node) *testDRADriver {
	t.Helper()
	root := filepath.Join(n.Dir, "kubelet")
	pluginDir := filepath.Join(root, "plugins", draDriver)
	harness.Must(t, os.MkdirAll(pluginDir, 0o750))
	d := &testDRADriver{endpoint: filepath.Join(pluginDir, "dra.sock"), registered: make(chan error, 1)}
	serve := func(sock string, register func(*grpc.Server)) {
		lis, err := net.Listen("unix", sock)
		harness.Must(t, err)
		s := grpc.NewServer()
		register(s)
		go func() { _ = s.Serve(lis) }()
		t.Cleanup(s.Stop)
	}
	serve(d.endpoint, func(s *grpc.Server) { drav1.RegisterDRAPluginServer(s, d) })
	serve(filepath.Join(root, "plugins_registry", draDriver+"-reg.sock"), func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, d) })
	select {
	case err := <-d.registered:
		harness.Must(t, err)
	case <-time.After(readyTimeout):
		t.Fatalf("kubelet did not register the DRA plugin within %s", readyTimeout)
	}
	return d
}

// TestDRANetworks: a NAD naming a claim of the pod (plexus.io/resource-claim)
// under a real kubelet with a DRA driver's kubelet plugin. No scheduler
// runs: the test allocates the claim and reserves it for the pod, as the
// scheduler would. Each attachment gets one of the claim's devices, which
// devhost moves into the pod; DEL returns them.
func TestDRANetworks(t *testing.T) {
	n := startNode(t, "dra")
	w := n.PlexusWorld()
	log := filepath.Join(w.Dir, "devhost.log")
	w.Set("deviceInfoDir", filepath.Join(w.Dir, "devinfo"))
	n.InstallPlexus(w)
	for _, id := range []string{"pxdr0", "pxdr1"} {
		la := netlink.NewLinkAttrs()
		la.Name = id
		harness.Must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: id + "h"}))
		t.Cleanup(func() { deleteLink(t, id) })
	}
	driver := startDRADriver(t, n)
	ctx := t.Context()
	const ns = "dra"
	harness.Must(t, n.Env.CreateNamespace(ctx, ns, nil))
	conf, _ := json.Marshal(map[string]any{"cniVersion": CNIVersion, "name": "dranet", "type": "devhost", "devhostLog": log,
		"capabilities": map[string]bool{"deviceID": true}})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nad.Group + "/" + nad.Version, "kind": nad.Kind,
		"metadata": map[string]any{"name": "dranet", "namespace": ns, "annotations": map[string]any{"plexus.io/resource-claim": "nics/nic"}},
		"spec":     map[string]any{"config": string(conf)},
	}}
	if _, err := kubeenv.NADs(n.Dyn).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim, err := n.Client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nics"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draDriver, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
		}}}},
	}, metav1.CreateOptions{})
	harness.Must(t, err)
	before := harness.HostVeths(t)

	pod := n.PodSpec(ns, "web", "dranet,dranet")
	claimName := "nics"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "nics", ResourceClaimName: &claimName}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "nics"}}
	created := n.CreatePod(pod)
	claim.Status = resourcev1.ResourceClaimStatus{
		Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "nic", Driver: draDriver, Pool: "pool", Device: "pxdr1"},
			{Request: "nic", Driver: draDriver, Pool: "pool", Device: "pxdr0"},
		}}},
		ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: created.Name, UID: created.UID}},
	}
	_, err = n.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	harness.Must(t, err)
	running := n.WaitRunning(ns, "web")

	driver.mu.Lock()
	prepared := slices.Clone(driver.prepared)
	driver.mu.Unlock()
	if len(prepared) == 0 {
		t.Errorf("kubelet never asked the DRA driver to prepare the claim")
	}
	var got []string
	for _, c := range readDevhostLog(t, log) {
		if c.Command == "ADD" {
			got = append(got, c.IfName+"="+c.RuntimeDeviceID)
			if c.ConfigDeviceID != c.RuntimeDeviceID {
				t.Errorf("%s: config deviceID %q, runtimeConfig %q", c.IfName, c.ConfigDeviceID, c.RuntimeDeviceID)
			}
		}
	}
	if want := []string{"net1=pxdr0", "net2=pxdr1"}; !slices.Equal(got, want) {
		t.Errorf("devhost ADDs %v, want %v", got, want)
	}
	links := n.PodNetns(running).Links(t)
	for ifName, dev := range map[string]string{"net1": "pxdr0", "net2": "pxdr1"} {
		if l, ok := links[ifName]; !ok || l.Attrs().Alias != dev {
			t.Errorf("pod's %s is not device %s: %v", ifName, dev, harness.IfNames(links))
		}
	}
	n.DeletePod(ns, "web")
	for _, id := range []string{"pxdr0", "pxdr1"} {
		if _, err := netlink.LinkByName(id); err != nil {
			t.Errorf("device link %s is not back on the host: %v", id, err)
		}
	}
	w.AssertNoLeaks(before)
}
