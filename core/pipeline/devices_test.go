package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/devinfo"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// fakeDevices is kubelet's pod-resources API for unit tests: it counts
// calls and answers from a map.
type fakeDevices struct {
	devs  PodDevices
	err   error
	calls int
}

func (f *fakeDevices) PodDevices(_ context.Context, ns, name string) (PodDevices, error) {
	f.calls++
	return f.devs, f.err
}

// perIfCNI remembers each attachment's config and runtimeConfig by
// interface (the same NAD twice is two attachments).
type perIfCNI struct {
	*fakeCNI
	conf map[string][]byte
	rt   map[string]*libcni.RuntimeConf
	// seenInfo is the CNI device-info file's content when the delegate ran.
	seenInfo map[string]string
}

func (c *perIfCNI) AddNetworkList(ctx context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
	c.conf[rt.IfName], c.rt[rt.IfName] = list.Bytes, rt
	if f, ok := rt.CapabilityArgs[devinfo.Capability].(string); ok {
		data, _ := os.ReadFile(f)
		c.seenInfo[rt.IfName] = string(data)
	}
	return c.fakeCNI.AddNetworkList(ctx, list, rt)
}

const devInfo = `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.%s"}}`

// deviceFixture: NAD demo/sriov names resource vendor.example/netdev; the
// device plugin left device-info for dev-a and dev-b.
func deviceFixture(t *testing.T, networks string, devs PodDevices) (*fixture, *fakeDevices, *perIfCNI, string) {
	t.Helper()
	f := newFixture(t, networks)
	f.src.addNAD("demo", "sriov", `{"cniVersion":"1.0.0","name":"sriov","plugins":[{"type":"host-device","capabilities":{"deviceID":true,"CNIDeviceInfoFile":true}},{"type":"tuning"}]}`)
	f.src.nads["demo/sriov"].Annotations = map[string]string{ResourceNameAnnotation: "vendor.example/netdev"}
	dir := t.TempDir()
	f.p.Config.DeviceInfoDir = dir
	files := devinfo.Files{Dir: dir}
	for i, id := range []string{"dev-a", "dev-b"} {
		dp, _ := files.DevicePluginFile("vendor.example/netdev", id)
		harnessWrite(t, dp, strings.Replace(devInfo, "%s", string(rune('1'+i)), 1))
	}
	fd := &fakeDevices{devs: devs}
	f.p.Devices = fd
	c := &perIfCNI{fakeCNI: f.cni, conf: map[string][]byte{}, rt: map[string]*libcni.RuntimeConf{}, seenInfo: map[string]string{}}
	f.p.CNI = c
	return f, fd, c, dir
}

func harnessWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, content)
}

func pluginDeviceIDs(t *testing.T, conf []byte) []any {
	t.Helper()
	var l struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(conf, &l); err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, p := range l.Plugins {
		out = append(out, p["deviceID"])
	}
	return out
}

func TestEachAttachmentOfAResourceGetsItsOwnDevice(t *testing.T) {
	// Kubelet's order is not stable; plexus sorts.
	f, fd, c, dir := deviceFixture(t, "sriov,net-a,sriov", PodDevices{"vendor.example/netdev": {"dev-b", "dev-a"}, "other/x": {"y"}})
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if fd.calls != 1 {
		t.Errorf("%d pod-resources calls, want 1", fd.calls)
	}
	// Devices cost no API request: the pod once, each distinct NAD once.
	if f.src.podReads != 1 || f.src.nadReads != 2 {
		t.Errorf("%d pod reads, %d NAD reads; want 1 and 2", f.src.podReads, f.src.nadReads)
	}
	for ifName, want := range map[string]string{"net1": "dev-a", "net3": "dev-b"} {
		if got := pluginDeviceIDs(t, c.conf[ifName]); !reflect.DeepEqual(got, []any{want, want}) {
			t.Errorf("%s: plugins' deviceID %v, want %s in each", ifName, got, want)
		}
		rt := c.rt[ifName].CapabilityArgs
		cniFile := filepath.Join(dir, "cni", "c1-"+ifName+"-device.json")
		if rt["deviceID"] != want || rt[devinfo.Capability] != cniFile {
			t.Errorf("%s: runtimeConfig %v", ifName, rt)
		}
		if !strings.Contains(c.seenInfo[ifName], `"pci-address"`) {
			t.Errorf("%s: the delegate found no device-info copy: %q", ifName, c.seenInfo[ifName])
		}
	}
	if got := pluginDeviceIDs(t, c.conf["net2"]); got[0] != nil {
		t.Errorf("net-a got a deviceID: %v", got)
	}
	var st []status.Entry
	if err := json.Unmarshal(f.src.status, &st); err != nil {
		t.Fatal(err)
	}
	if compact(st[1].DeviceInfo) != `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.1"}}` ||
		compact(st[3].DeviceInfo) != `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.2"}}` || st[2].DeviceInfo != nil {
		t.Errorf("status device-info: %s | %s | %s", st[1].DeviceInfo, st[2].DeviceInfo, st[3].DeviceInfo)
	}
	if err := f.p.Del(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "cni")); len(left) != 0 {
		t.Errorf("CNI device-info files left after DEL: %v", left)
	}
}

func TestRequestedDeviceIDIsHonoredAndOthersFillIn(t *testing.T) {
	f, _, c, _ := deviceFixture(t, `[{"name":"sriov"},{"name":"sriov","deviceID":"dev-a"}]`, PodDevices{"vendor.example/netdev": {"dev-a", "dev-b"}})
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if c.rt["net1"].CapabilityArgs["deviceID"] != "dev-b" || c.rt["net2"].CapabilityArgs["deviceID"] != "dev-a" {
		t.Errorf("net1 %v, net2 %v", c.rt["net1"].CapabilityArgs["deviceID"], c.rt["net2"].CapabilityArgs["deviceID"])
	}
}

func TestDeviceIDWithoutResourcePassesThrough(t *testing.T) {
	f, fd, c, _ := deviceFixture(t, `[{"name":"net-a","deviceID":"0000:18:02.5","infiniband-guid":"c2:11:22:33:44:55:66:77"}]`, nil)
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if fd.calls != 0 {
		t.Errorf("%d pod-resources calls for a pod without device networks", fd.calls)
	}
	rt := c.rt["net1"].CapabilityArgs
	if rt["deviceID"] != "0000:18:02.5" || rt["infinibandGUID"] != "c2:11:22:33:44:55:66:77" {
		t.Errorf("runtimeConfig %v", rt)
	}
	if got := pluginDeviceIDs(t, c.conf["net1"]); got[0] != "0000:18:02.5" {
		t.Errorf("config deviceID %v", got)
	}
	if _, ok := rt[devinfo.Capability]; ok {
		t.Errorf("device-info file without a resource: %v", rt)
	}
}

func TestNoDevicesNoPodResourcesCall(t *testing.T) {
	f, fd, _, _ := deviceFixture(t, "net-a,net-b", nil)
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if fd.calls != 0 {
		t.Errorf("%d pod-resources calls", fd.calls)
	}
}

func TestDeviceErrorsAttachNothing(t *testing.T) {
	tests := []struct {
		name, networks string
		devs           PodDevices
		err            error
		want           []string
	}{
		{"fewer devices than selections", "sriov,sriov,sriov", PodDevices{"vendor.example/netdev": {"dev-a", "dev-b"}}, nil,
			[]string{"vendor.example/netdev", "allocated 2 device(s)", "3 attachment(s)"}},
		{"resource not requested", "sriov", PodDevices{"other/x": {"y"}}, nil,
			[]string{"vendor.example/netdev", "no device", "resources.limits"}},
		{"kubelet unreachable", "sriov", nil, errors.New("dial unix /x/kubelet.sock: connect: no such file or directory"),
			[]string{"asking kubelet", "kubelet.sock"}},
		{"requested device not the pod's", `[{"name":"sriov","deviceID":"dev-z"}]`, PodDevices{"vendor.example/netdev": {"dev-a"}}, nil,
			[]string{`"dev-z"`, "not one of the pod's (dev-a)"}},
		{"requested device twice", `[{"name":"sriov","deviceID":"dev-a"},{"name":"sriov","deviceID":"dev-a"}]`, PodDevices{"vendor.example/netdev": {"dev-a", "dev-b"}}, nil,
			[]string{"already requested by element 0"}},
		{"kubelet's device ID is path-like", "sriov", PodDevices{"vendor.example/netdev": {"../../etc/x"}}, nil,
			[]string{"not a device ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, _, dir := deviceFixture(t, tt.networks, tt.devs)
			f.p.Devices.(*fakeDevices).err = tt.err
			_, err := f.p.Add(context.Background(), f.req)
			assertDevicesRefused(t, f, err, tt.want)
			if rec, _ := f.p.Records.Load("c1"); rec != nil {
				t.Errorf("record left: %+v", rec)
			}
			if left, _ := os.ReadDir(filepath.Join(dir, "cni")); len(left) != 0 {
				t.Errorf("device-info files left: %v", left)
			}
		})
	}
}

func TestInvalidResourceNameOnTheNADIsAnError(t *testing.T) {
	f, fd, _, _ := deviceFixture(t, "sriov", nil)
	f.src.nads["demo/sriov"].Annotations[ResourceNameAnnotation] = "../../etc"
	_, err := f.p.Add(context.Background(), f.req)
	if err == nil || !strings.Contains(err.Error(), "not an extended resource name") || fd.calls != 0 {
		t.Fatalf("err %v, calls %d", err, fd.calls)
	}
}

func TestFailedDelegateRemovesTheDeviceInfoFile(t *testing.T) {
	f, _, _, dir := deviceFixture(t, "sriov", PodDevices{"vendor.example/netdev": {"dev-a"}})
	f.cni.fail["ADD sriov"] = errors.New("boom")
	if _, err := f.p.Add(context.Background(), f.req); err == nil {
		t.Fatal("ADD succeeded")
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "cni")); len(left) != 0 {
		t.Errorf("device-info files left after the rollback: %v", left)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid: " + string(raw)
	}
	return b.String()
}

// claimSource is fakeSource reading ResourceClaims too.
type claimSource struct {
	*fakeSource
	claims map[string]*source.ResourceClaim
	reads  int
}

func (s *claimSource) ResourceClaim(_ context.Context, ns, name string) (*source.ResourceClaim, error) {
	s.reads++
	if c, ok := s.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, source.NotFound("ResourceClaim", ns, name)
}

func claimFixture(t *testing.T, networks, annotation string, podClaims map[string]string, claim *source.ResourceClaim) (*fixture, *claimSource, *perIfCNI) {
	t.Helper()
	f, _, c, _ := deviceFixture(t, networks, nil)
	f.src.nads["demo/sriov"].Annotations = map[string]string{ResourceClaimAnnotation: annotation}
	f.src.pods["demo/web"].ResourceClaims = podClaims
	cs := &claimSource{fakeSource: f.src, claims: map[string]*source.ResourceClaim{}}
	if claim != nil {
		cs.claims["demo/"+claim.Name] = claim
	}
	f.p.Source = cs
	return f, cs, c
}

func TestClaimDevicesGoToTheAttachments(t *testing.T) {
	claim := &source.ResourceClaim{Namespace: "demo", Name: "web-nics-x7", ReservedFor: []string{"u1"}, Devices: []source.ClaimDevice{
		{Request: "nic", Driver: "net.example.com", Pool: "node-1", Device: "vf-1"},
		{Request: "nic", Driver: "net.example.com", Pool: "node-1", Device: "vf-0"},
		{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"},
	}}
	f, cs, c := claimFixture(t, "sriov,sriov", "nics/nic", map[string]string{"nics": "web-nics-x7"}, claim)
	if _, err := f.p.Add(context.Background(), f.req); err != nil {
		t.Fatal(err)
	}
	if cs.reads != 1 {
		t.Errorf("%d ResourceClaim reads, want 1", cs.reads)
	}
	if c.rt["net1"].CapabilityArgs["deviceID"] != "vf-0" || c.rt["net2"].CapabilityArgs["deviceID"] != "vf-1" {
		t.Errorf("net1 %v, net2 %v", c.rt["net1"].CapabilityArgs, c.rt["net2"].CapabilityArgs)
	}
	if got := pluginDeviceIDs(t, c.conf["net2"]); got[0] != "vf-1" {
		t.Errorf("config deviceID %v", got)
	}
}

func TestClaimErrorsAttachNothing(t *testing.T) {
	reserved := func(uid string, devs ...string) *source.ResourceClaim {
		c := &source.ResourceClaim{Namespace: "demo", Name: "claim-1", ReservedFor: []string{uid}}
		for _, d := range devs {
			c.Devices = append(c.Devices, source.ClaimDevice{Request: "nic", Driver: "net.example.com", Pool: "p", Device: d})
		}
		return c
	}
	tests := []struct {
		name, networks, annotation string
		podClaims                  map[string]string
		claim                      *source.ResourceClaim
		want                       []string
	}{
		{"claim not the pod's", "sriov", "other", map[string]string{"nics": "claim-1"}, reserved("u1", "vf-0"), []string{`"other"`, "does not have", "nics"}},
		{"claim not generated yet", "sriov", "nics", map[string]string{"nics": ""}, nil, []string{"no ResourceClaim yet"}},
		{"claim reserved for another pod", "sriov", "nics", map[string]string{"nics": "claim-1"}, reserved("u2", "vf-0"), []string{"not reserved for this pod"}},
		{"fewer devices than selections", "sriov,sriov", "nics", map[string]string{"nics": "claim-1"}, reserved("u1", "vf-0"), []string{"allocated 1 device(s)", "2 attachment(s)"}},
		{"claim missing", "sriov", "nics", map[string]string{"nics": "claim-1"}, nil, []string{"ResourceClaim demo/claim-1", "not found"}},
		{"invalid reference", "sriov", "../x", map[string]string{}, nil, []string{"DNS-1123"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, _ := claimFixture(t, tt.networks, tt.annotation, tt.podClaims, tt.claim)
			_, err := f.p.Add(context.Background(), f.req)
			assertDevicesRefused(t, f, err, tt.want)
		})
	}
}

// assertDevicesRefused: the ADD failed with codes.Devices, its message
// names every part of want, and no delegate ran.
func assertDevicesRefused(t *testing.T, f *fixture, err error, want []string) {
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) || te.Code != codes.Devices {
		t.Fatalf("want CNI error %d, got %v", codes.Devices, err)
	}
	for _, w := range want {
		if !strings.Contains(te.Msg, w) {
			t.Errorf("error %q should mention %q", te.Msg, w)
		}
	}
	if len(f.cni.calls) != 0 {
		t.Errorf("delegates ran: %v", f.cni.calls)
	}
}
