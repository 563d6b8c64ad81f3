package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/lock"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
)

// fakeCNI records delegate calls; unit tests only (the netns suite runs
// the real plugins).
type fakeCNI struct {
	mu    sync.Mutex
	calls []string // "ADD net ifname", "DEL net ifname", ...
	// fail maps "OP network" to an error.
	fail map[string]error
	// ips maps a network name to the addresses its result reports.
	ips map[string]string
	// mac, when set, is the sandbox MAC every result reports.
	mac      string
	noResult map[string]bool
	lastRT   map[string]*libcni.RuntimeConf
	lastConf map[string][]byte
	// cached is what GetCachedAttachments returns.
	cached []*libcni.NetworkAttachment
	// results are the ADD results by "network ifname", as libcni caches
	// them until the DEL.
	results map[string]types.Result
}

func newFakeCNI() *fakeCNI {
	return &fakeCNI{fail: map[string]error{}, ips: map[string]string{}, noResult: map[string]bool{}, lastRT: map[string]*libcni.RuntimeConf{}, lastConf: map[string][]byte{}, results: map[string]types.Result{}}
}

func (f *fakeCNI) record(op string, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %s %s", op, list.Name, rt.IfName))
	f.lastRT[list.Name] = rt
	f.lastConf[list.Name] = list.Bytes
	return f.fail[op+" "+list.Name]
}

func (f *fakeCNI) AddNetworkList(_ context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
	if err := f.record("ADD", list, rt); err != nil {
		return nil, err
	}
	if f.noResult[list.Name] {
		return nil, nil
	}
	addr := f.ips[list.Name]
	if addr == "" {
		addr = "10.0.0.2/24"
	}
	zero := 0
	var ips []*types100.IPConfig
	// Several addresses (dual stack) are comma separated.
	for _, a := range strings.Split(addr, ",") {
		ip, ipn, _ := net.ParseCIDR(a)
		ipn.IP = ip
		ips = append(ips, &types100.IPConfig{Address: *ipn, Interface: &zero})
	}
	mac := f.mac
	if mac == "" {
		mac = "02:00:00:00:00:01"
	}
	res := &types100.Result{
		CNIVersion: "1.0.0",
		Interfaces: []*types100.Interface{{Name: rt.IfName, Mac: mac, Sandbox: "/var/run/netns/test"}},
		IPs:        ips,
	}
	f.mu.Lock()
	f.results[list.Name+" "+rt.IfName] = res
	f.mu.Unlock()
	return res, nil
}

func (f *fakeCNI) DelNetworkList(_ context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	if err := f.record("DEL", list, rt); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.results, list.Name+" "+rt.IfName)
	f.mu.Unlock()
	return nil
}

func (f *fakeCNI) CheckNetworkList(_ context.Context, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) error {
	return f.record("CHECK", list, rt)
}

func (f *fakeCNI) GCNetworkList(_ context.Context, list *libcni.NetworkConfigList, args *libcni.GCArgs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("GC %s %v", list.Name, args.ValidAttachments))
	return nil
}

func (f *fakeCNI) GetStatusNetworkList(_ context.Context, list *libcni.NetworkConfigList) error {
	return f.record("STATUS", list, &libcni.RuntimeConf{})
}

func (f *fakeCNI) GetCachedAttachments(string) ([]*libcni.NetworkAttachment, error) {
	return f.cached, nil
}
func (f *fakeCNI) GetNetworkListCachedResult(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.results[list.Name+" "+rt.IfName], nil
}
func (f *fakeCNI) GetNetworkListCachedConfig(*libcni.NetworkConfigList, *libcni.RuntimeConf) ([]byte, *libcni.RuntimeConf, error) {
	return nil, nil, nil
}
func (f *fakeCNI) AddNetwork(context.Context, *libcni.PluginConfig, *libcni.RuntimeConf) (types.Result, error) {
	panic("plexus delegates config lists only")
}
func (f *fakeCNI) CheckNetwork(context.Context, *libcni.PluginConfig, *libcni.RuntimeConf) error {
	panic("plexus delegates config lists only")
}
func (f *fakeCNI) DelNetwork(context.Context, *libcni.PluginConfig, *libcni.RuntimeConf) error {
	panic("plexus delegates config lists only")
}
func (f *fakeCNI) GetNetworkCachedResult(*libcni.PluginConfig, *libcni.RuntimeConf) (types.Result, error) {
	return nil, nil
}
func (f *fakeCNI) GetNetworkCachedConfig(*libcni.PluginConfig, *libcni.RuntimeConf) ([]byte, *libcni.RuntimeConf, error) {
	return nil, nil, nil
}
func (f *fakeCNI) ValidateNetworkList(context.Context, *libcni.NetworkConfigList) ([]string, error) {
	return nil, nil
}
func (f *fakeCNI) ValidateNetwork(context.Context, *libcni.PluginConfig) ([]string, error) {
	return nil, nil
}
func (f *fakeCNI) GetVersionInfo(context.Context, string) (version.PluginInfo, error) {
	return nil, nil
}

// fakeSource is an in-memory source that counts calls.
type fakeSource struct {
	pods     map[string]*source.Pod
	nads     map[string]*source.NAD
	status   []byte
	events   []string
	nadReads int
	podReads int
}

func (s *fakeSource) Pod(_ context.Context, ns, name string) (*source.Pod, error) {
	s.podReads++
	if p, ok := s.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, source.NotFound("Pod", ns, name)
}

func (s *fakeSource) NAD(_ context.Context, ns, name string) (*source.NAD, error) {
	s.nadReads++
	if n, ok := s.nads[ns+"/"+name]; ok {
		return n, nil
	}
	return nil, source.NotFound("NetworkAttachmentDefinition", ns, name)
}

func (s *fakeSource) PublishStatus(_ context.Context, _ *source.Pod, doc []byte) error {
	s.status = doc
	return nil
}

func (s *fakeSource) Event(_ context.Context, _ *source.Pod, typ source.EventType, reason, msg string) {
	s.events = append(s.events, string(typ)+" "+reason+": "+msg)
}

func (s *fakeSource) addNAD(ns, name, config string) {
	s.nads[ns+"/"+name] = &nad.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nad.Spec{Config: config}}
}

type fixture struct {
	p   *Pipeline
	cni *fakeCNI
	src *fakeSource
	req *Request
}

// newFixture: a default network file, a pod demo/web selecting networks,
// and NADs net-a, net-b, net-c in demo.
func newFixture(t *testing.T, networks string) *fixture {
	t.Helper()
	dir := t.TempDir()
	def := filepath.Join(dir, "default.conf")
	writeFile(t, def, `{"cniVersion":"1.0.0","name":"default-net","type":"bridge"}`)
	src := &fakeSource{pods: map[string]*source.Pod{}, nads: map[string]*source.NAD{}}
	src.pods["demo/web"] = &source.Pod{Namespace: "demo", Name: "web", UID: "u1", Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": networks}}
	for _, n := range []string{"net-a", "net-b", "net-c"} {
		src.addNAD("demo", n, `{"cniVersion":"1.0.0","name":"`+n+`","type":"bridge"}`)
	}
	cni := newFakeCNI()
	p := &Pipeline{
		Config:  &config.Config{ClusterNetwork: def, CallSettings: config.CallSettings{ConfDir: dir}, SystemNamespace: "kube-system"},
		Source:  src,
		CNI:     cni,
		Records: &record.Store{Dir: filepath.Join(dir, "records")},
		Deleted: &record.Tombstones{Dir: filepath.Join(dir, "deleted")},
		Locks:   &lock.Locker{Dir: filepath.Join(dir, "locks")},
		Log:     slog.New(slog.DiscardHandler),
	}
	req := &Request{ContainerID: "c1", NetNS: "/var/run/netns/test", IfName: "eth0", CNIVersion: "1.0.0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "web"}, {"K8S_POD_UID", "u1"}}}
	return &fixture{p: p, cni: cni, src: src, req: req}
}
