package node

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

const testResource = "plexus.test/netdev"

// deviceStatus is a network-status entry with the device-info spec's key.
type deviceStatus struct {
	Name       string          `json:"name"`
	Interface  string          `json:"interface"`
	DeviceInfo json.RawMessage `json:"device-info"`
}

// devicesWorld is a node running plexus (thin) with the test device
// plugin's three devices, and a NAD "sriov" in namespace ns naming its
// resource, whose delegate is devhost (host-device on the device's link).
type devicesWorld struct {
	n       *Node
	w       *harness.World
	ns      string
	infoDir string
	log     string
	plugin  *testDevicePlugin
	devices []string
	// podResourcesSocket is kubelet's, under its root directory.
	podResourcesSocket string
}

func newDevicesWorld(t *testing.T) *devicesWorld {
	n := startNode(t, "devices")
	w := n.PlexusWorld()
	d := &devicesWorld{n: n, w: w, ns: "devices", infoDir: filepath.Join(w.Dir, "devinfo"), log: filepath.Join(w.Dir, "devhost.log"),
		devices: []string{"pxdv0", "pxdv1", "pxdv2"}}
	w.Set("deviceInfoDir", d.infoDir)
	d.podResourcesSocket = filepath.Join(n.Dir, "kubelet", "pod-resources", "kubelet.sock")
	w.Set("podResourcesSocket", d.podResourcesSocket)
	n.InstallPlexus(w)
	d.plugin = startDevicePlugin(t, n, testResource, d.infoDir, d.devices...)
	harness.Must(t, n.Env.CreateNamespace(t.Context(), d.ns, nil))
	conf, _ := json.Marshal(map[string]any{
		"cniVersion": CNIVersion, "name": "sriov", "type": "devhost", "devhostLog": d.log,
		"capabilities": map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true},
	})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nad.Group + "/" + nad.Version, "kind": nad.Kind,
		"metadata": map[string]any{"name": "sriov", "namespace": d.ns,
			"annotations": map[string]any{"k8s.v1.cni.cncf.io/resourceName": testResource}},
		"spec": map[string]any{"config": string(conf)},
	}}
	if _, err := kubeenv.NADs(n.Dyn).Namespace(d.ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return d
}

// podRequesting is a pod selecting networks whose container requests
// count devices of the test resource.
func (d *devicesWorld) podRequesting(name, networks string, count int64) *corev1.Pod {
	p := d.n.PodSpec(d.ns, name, networks)
	if count > 0 {
		q := *resource.NewQuantity(count, resource.DecimalSI)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{testResource: q}
	}
	return p
}

// podResourcesCalls is kubelet's count of pod-resources API requests, all
// and Get's.
func (d *devicesWorld) podResourcesCalls(t *testing.T) (all, get float64) {
	t.Helper()
	all, err := d.n.KubeletMetric(t.Context(), "kubelet_pod_resources_endpoint_requests_total")
	harness.Must(t, err)
	get, err = d.n.KubeletMetric(t.Context(), "kubelet_pod_resources_endpoint_requests_get")
	harness.Must(t, err)
	return all, get
}

// checkOneADDCalls checks kubelet's count of pod-resources requests for
// one ADD: one Get where kubelet serves Get (1.34 and later, by default);
// on older kubelets (make test-skew) a refused Get, which kubelet counts
// among all requests only, then one List.
func (d *devicesWorld) checkOneADDCalls(t *testing.T, all, get float64) {
	t.Helper()
	wantAll, wantGet := 1.0, 1.0
	if d.n.KubeletMinor(t) < 34 {
		wantAll, wantGet = 2, 0
	}
	if all != wantAll || get != wantGet {
		t.Errorf("%v pod-resources calls (%v Get) for one ADD on kubelet 1.%d, want %v (%v Get)", all, get, d.n.KubeletMinor(t), wantAll, wantGet)
	}
}

// assertDevicesOnHost checks every device link is back in the host's
// namespace and no CNI device-info file is left.
func (d *devicesWorld) assertDevicesOnHost(t *testing.T) {
	t.Helper()
	for _, id := range d.devices {
		if _, err := netlink.LinkByName(id); err != nil {
			t.Errorf("device link %s is not on the host: %v", id, err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(d.infoDir, "cni")); len(left) > 0 {
		t.Errorf("CNI device-info files left: %v", left)
	}
}

func (d *devicesWorld) adds(t *testing.T) []devhostCall {
	var out []devhostCall
	for _, c := range readDevhostLog(t, d.log) {
		if c.Command == "ADD" {
			out = append(out, c)
		}
	}
	return out
}

// TestDevicePluginNetworks: a NAD naming a device plugin resource, under a
// real kubelet with a device plugin speaking the v1beta1 API. Each
// attachment gets its own device of the pod's, the delegate receives it in
// its config and runtimeConfig with the device-info file, network-status
// carries device-info, DEL returns the links; shortages fail the ADD with
// nothing attached.
func TestDevicePluginNetworks(t *testing.T) {
	d := newDevicesWorld(t)
	n := d.n

	t.Run("two devices selected twice", func(t *testing.T) {
		n := n.With(t)
		before := harness.HostVeths(t)
		all, get := d.podResourcesCalls(t)
		n.CreatePod(d.podRequesting("two", "sriov,sriov", 2))
		pod := n.WaitRunning(d.ns, "two")
		all2, get2 := d.podResourcesCalls(t)
		d.checkOneADDCalls(t, all2-all, get2-get)
		adds := d.adds(t)
		if len(adds) != 2 {
			t.Fatalf("devhost ADDs %+v, want 2", adds)
		}
		var used []string
		for _, c := range adds {
			if c.ConfigDeviceID == "" || c.ConfigDeviceID != c.RuntimeDeviceID {
				t.Errorf("%s: config deviceID %q, runtimeConfig deviceID %q", c.IfName, c.ConfigDeviceID, c.RuntimeDeviceID)
			}
			if !strings.Contains(string(c.DeviceInfo), `"pci-address"`) || !strings.HasPrefix(c.DeviceInfoFile, filepath.Join(d.infoDir, "cni")+"/") {
				t.Errorf("%s: device-info file %q held %s", c.IfName, c.DeviceInfoFile, c.DeviceInfo)
			}
			used = append(used, c.ConfigDeviceID)
		}
		allocated := slices.Concat(d.plugin.allocs...)
		slices.Sort(allocated)
		slices.Sort(used)
		if !slices.Equal(used, allocated) || used[0] == used[1] {
			t.Errorf("attachments use devices %v; kubelet allocated %v", used, allocated)
		}
		links := n.PodNetns(pod).Links(t)
		for i, ifName := range []string{"net1", "net2"} {
			l, ok := links[ifName]
			if !ok {
				t.Errorf("pod has no %s: %v", ifName, harness.IfNames(links))
				continue
			}
			if alias := l.Attrs().Alias; alias != adds[i].ConfigDeviceID {
				t.Errorf("%s is host link %q, want device %q", ifName, alias, adds[i].ConfigDeviceID)
			}
		}
		var st []deviceStatus
		harness.Must(t, json.Unmarshal([]byte(n.GetPod(d.ns, "two").Annotations[StatusAnnotation]), &st))
		if len(st) != 3 || st[0].DeviceInfo != nil {
			t.Fatalf("network-status %+v", st)
		}
		for _, e := range st[1:] {
			if !strings.Contains(string(e.DeviceInfo), `"type":"pci"`) && !strings.Contains(string(e.DeviceInfo), `"type": "pci"`) {
				t.Errorf("network-status %s has device-info %s", e.Interface, e.DeviceInfo)
			}
		}
		if string(st[1].DeviceInfo) == string(st[2].DeviceInfo) {
			t.Errorf("both attachments report the same device-info %s", st[1].DeviceInfo)
		}
		n.DeletePod(d.ns, "two")
		d.assertDevicesOnHost(t)
		d.w.AssertNoLeaks(before)
	})

	t.Run("no device networks, no pod-resources call", func(t *testing.T) {
		n := n.With(t)
		all, _ := d.podResourcesCalls(t)
		n.CreatePod(d.podRequesting("plain", "", 1))
		n.WaitRunning(d.ns, "plain")
		if all2, _ := d.podResourcesCalls(t); all2 != all {
			t.Errorf("%v pod-resources calls for a pod without device networks", all2-all)
		}
		n.DeletePod(d.ns, "plain")
	})

	failing := []struct {
		name, networks string
		request        int64
		want           []string
	}{
		{"fewer devices than selections", "sriov,sriov", 1, []string{testResource, "allocated 1 device(s)", "2 attachment(s)"}},
		{"resource not requested", "sriov", 0, []string{testResource, "no device"}},
	}
	for _, tt := range failing {
		t.Run(tt.name, func(t *testing.T) {
			n := n.With(t)
			d.failsWithNothingAttached(t, n, tt.name, tt.networks, tt.request, tt.want)
		})
	}

	t.Run("kubelet socket missing", func(t *testing.T) {
		n := n.With(t)
		d.w.Set("podResourcesSocket", filepath.Join(d.w.Dir, "no-kubelet.sock"))
		n.InstallPlexus(d.w)
		d.failsWithNothingAttached(t, n, "no-socket", "sriov", 1, []string{"no-kubelet.sock", "does not exist"})
	})

	// Thick mode, last (its shim config stays installed): plexusd asks
	// kubelet once per ADD (its own metric and kubelet's agree), with the
	// pod and NADs from its informer caches.
	t.Run("thick", func(t *testing.T) {
		n := n.With(t)
		w := n.PlexusWorld()
		w.Set("deviceInfoDir", d.infoDir)
		w.Set("podResourcesSocket", d.podResourcesSocket)
		daemon := w.StartDaemon("--node-name", n.Name)
		defer logOnFailure(t, daemon)
		n.InstallPlexus(w)
		before := harness.HostVeths(t)
		adds := len(d.adds(t))
		all, get := d.podResourcesCalls(t)
		n.CreatePod(d.podRequesting("thick", "sriov,sriov", 2))
		n.WaitRunning(d.ns, "thick")
		all2, get2 := d.podResourcesCalls(t)
		d.checkOneADDCalls(t, all2-all, get2-get)
		if got := daemon.Metric("plexus_pod_resources_calls_total", `method="Get"`); got != 1 {
			t.Errorf("plexusd counted %v pod-resources calls, want 1", got)
		}
		calls := d.adds(t)[adds:]
		if len(calls) != 2 || calls[0].RuntimeDeviceID == calls[1].RuntimeDeviceID || calls[0].RuntimeDeviceID == "" {
			t.Errorf("devhost ADDs %+v, want two with distinct devices", calls)
		}
		var st []deviceStatus
		harness.Must(t, json.Unmarshal([]byte(n.GetPod(d.ns, "thick").Annotations[StatusAnnotation]), &st))
		if len(st) != 3 || len(st[1].DeviceInfo) == 0 || len(st[2].DeviceInfo) == 0 {
			t.Errorf("network-status %+v", st)
		}
		n.DeletePod(d.ns, "thick")
		d.assertDevicesOnHost(t)
		w.AssertNoLeaks(before)
	})
}

// failsWithNothingAttached runs a pod whose ADD must fail with want in
// the error, and checks no delegate ran and nothing was left.
func (d *devicesWorld) failsWithNothingAttached(t *testing.T, n *Node, name, networks string, request int64, want []string) {
	t.Helper()
	name = strings.ReplaceAll(name, " ", "-")
	before := harness.HostVeths(t)
	adds := len(d.adds(t))
	n.CreatePod(d.podRequesting(name, networks, request))
	_, err := n.waitRunning(d.ns, name)
	var se *SandboxError
	if !errors.As(err, &se) {
		t.Fatalf("pod %s: want a failed sandbox, got %v", name, err)
	}
	for _, w := range want {
		if !strings.Contains(se.Message, w) {
			t.Errorf("sandbox error %q should mention %q", se.Message, w)
		}
	}
	if got := len(d.adds(t)); got != adds {
		t.Errorf("a delegate ran: %d devhost ADDs, before %d", got, adds)
	}
	n.DeletePod(d.ns, name)
	d.assertDevicesOnHost(t)
	d.w.AssertNoLeaks(before)
}
