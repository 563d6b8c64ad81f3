package netns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// binDir holds plexus, the reference plugins and cnitool, built once.
var binDir string

// subnetSeq hands each network its own /24 in 10.(100+n).x.0.
var subnetSeq atomic.Int32

var referencePlugins = []string{
	"github.com/containernetworking/plugins/plugins/main/bridge",
	"github.com/containernetworking/plugins/plugins/main/macvlan",
	"github.com/containernetworking/plugins/plugins/main/vlan",
	"github.com/containernetworking/plugins/plugins/main/ptp",
	"github.com/containernetworking/plugins/plugins/main/loopback",
	"github.com/containernetworking/plugins/plugins/ipam/host-local",
	"github.com/containernetworking/plugins/plugins/ipam/static",
	"github.com/containernetworking/plugins/plugins/meta/tuning",
	"github.com/containernetworking/plugins/plugins/meta/bandwidth",
	"github.com/containernetworking/cni/cnitool",
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		if os.Getenv("PLEXUS_E2E") == "1" {
			fmt.Fprintln(os.Stderr, "netns integration tests need root (PLEXUS_E2E=1 is set)")
			return 1
		}
		fmt.Fprintln(os.Stderr, "skipping netns integration tests: not root")
		return 0
	}
	dir, err := os.MkdirTemp("", "plexus-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	return m.Run()
}

func build(dir string) error {
	if pre := os.Getenv("PLEXUS_BIN"); pre != "" {
		// make test builds once into bin/ and points the tests at it.
		for _, f := range append([]string{"github.com/plexus-cni/plexus/cmd/plexus"}, referencePlugins...) {
			src := filepath.Join(pre, filepath.Base(f))
			if err := os.Symlink(src, filepath.Join(dir, filepath.Base(f))); err != nil {
				return err
			}
		}
		return nil
	}
	args := append([]string{"build", "-o", dir + "/", "github.com/plexus-cni/plexus/cmd/plexus"}, referencePlugins...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building plugins: %w", err)
	}
	return nil
}

// harness is one test's world: a plexus config, manifests, a default
// bridge network, a cache dir and an IPAM data dir, all under t.TempDir.
type harness struct {
	t         *testing.T
	dir       string
	netconf   string // cnitool's NETCONFPATH
	manifests string
	confDir   string
	cacheDir  string
	ipamDir   string
	bridges   []string
	plexus    map[string]any
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{
		t: t, dir: dir,
		netconf:   filepath.Join(dir, "netconf"),
		manifests: filepath.Join(dir, "manifests"),
		confDir:   filepath.Join(dir, "confdir"),
		cacheDir:  filepath.Join(dir, "cache"),
		ipamDir:   filepath.Join(dir, "ipam"),
	}
	for _, d := range []string{h.netconf, h.manifests, h.confDir, h.ipamDir} {
		must(t, os.MkdirAll(d, 0o755))
	}
	defaultBr := h.bridge()
	h.writeFile(filepath.Join(dir, "default.conflist"), h.bridgeConf("cluster-default", defaultBr, "1.0.0", true))
	h.plexus = map[string]any{
		"cniVersion":     "1.0.0",
		"name":           "plexus",
		"type":           "plexus",
		"clusterNetwork": filepath.Join(dir, "default.conflist"),
		"manifests":      h.manifests,
		"confDir":        h.confDir,
		"cacheDir":       h.cacheDir,
		"binDir":         binDir,
		"logFile":        filepath.Join(dir, "plexus.log"),
		"logLevel":       "debug",
	}
	h.writePlexus()
	t.Cleanup(h.cleanupBridges)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "plexus.log"))
			t.Logf("plexus.log:\n%s", b)
		}
	})
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) writeFile(path, content string) {
	h.t.Helper()
	must(h.t, os.WriteFile(path, []byte(content), 0o644))
}

// set changes a plexus config key and rewrites the config.
func (h *harness) set(key string, v any) {
	if v == nil {
		delete(h.plexus, key)
	} else {
		h.plexus[key] = v
	}
	h.writePlexus()
}

func (h *harness) writePlexus() {
	b, err := json.Marshal(h.plexus)
	must(h.t, err)
	h.writeFile(filepath.Join(h.netconf, "00-plexus.conf"), string(b))
}

// bridge returns a fresh bridge name, removed when the test ends.
func (h *harness) bridge() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "pxb" + hex.EncodeToString(b)
	h.bridges = append(h.bridges, name)
	return name
}

func (h *harness) cleanupBridges() {
	for _, b := range h.bridges {
		if l, err := netlink.LinkByName(b); err == nil {
			_ = netlink.LinkDel(l)
		}
	}
}

// subnet returns a fresh /24.
func subnet() string {
	n := subnetSeq.Add(1)
	return fmt.Sprintf("10.%d.%d.0/24", 100+n/250, n%250)
}

// bridgeConf is a bridge + host-local conflist (optionally with tuning and
// bandwidth, so capabilities are exercised).
func (h *harness) bridgeConf(name, br, cniVersion string, withBandwidth bool) string {
	plugins := []any{map[string]any{
		"type": "bridge", "bridge": br, "isGateway": true,
		"ipam": map[string]any{"type": "host-local", "subnet": subnet(), "dataDir": h.ipamDir},
	}}
	if withBandwidth {
		plugins = append(plugins, map[string]any{"type": "bandwidth", "capabilities": map[string]any{"bandwidth": true}})
	}
	b, _ := json.Marshal(map[string]any{"cniVersion": cniVersion, "name": name, "plugins": plugins})
	return string(b)
}

// nad writes a NetworkAttachmentDefinition manifest.
func (h *harness) nad(namespace, name, config string) {
	cfg, _ := json.Marshal(config)
	h.writeFile(filepath.Join(h.manifests, "nad-"+namespace+"-"+name+".yaml"), fmt.Sprintf(
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  config: %s\n",
		name, namespace, cfg))
}

// bridgeNAD writes a NAD for a fresh bridge network with host-local IPAM.
func (h *harness) bridgeNAD(namespace, name string) {
	var m map[string]any
	_ = json.Unmarshal([]byte(h.bridgeConf(name, h.bridge(), "1.0.0", false)), &m)
	plugin := m["plugins"].([]any)[0].(map[string]any)
	plugin["cniVersion"], plugin["name"] = "1.0.0", name
	b, _ := json.Marshal(plugin)
	h.nad(namespace, name, string(b))
}

// pod writes a Pod manifest with the selection annotation.
func (h *harness) pod(namespace, name, networks string) {
	ann, _ := json.Marshal(networks)
	h.writeFile(filepath.Join(h.manifests, "pod-"+namespace+"-"+name+".yaml"), fmt.Sprintf(
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  uid: uid-%s\n  annotations:\n    k8s.v1.cni.cncf.io/networks: %s\nspec:\n  nodeName: node1\n",
		name, namespace, name, ann))
}

func (h *harness) removePod(namespace, name string) {
	must(h.t, os.Remove(filepath.Join(h.manifests, "pod-"+namespace+"-"+name+".yaml")))
}

// container is a network namespace standing in for a pod sandbox.
type container struct {
	ns        ns.NetNS
	namespace string
	name      string
	env       []string
}

func (h *harness) container(namespace, name string) *container {
	h.t.Helper()
	n, err := testutils.NewNS()
	must(h.t, err)
	h.t.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	return &container{ns: n, namespace: namespace, name: name}
}

// cnitool runs one command as a container runtime would.
func (h *harness) cnitool(c *container, command string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "cnitool"), command, "plexus", c.ns.Path())
	cmd.Env = append(os.Environ(),
		"NETCONFPATH="+h.netconf,
		"CNI_PATH="+binDir,
		"CNI_ARGS="+fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=uid-%s;K8S_POD_INFRA_CONTAINER_ID=x", c.namespace, c.name, c.name),
	)
	cmd.Env = append(cmd.Env, c.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), fmt.Errorf("cnitool %s: %w: %s%s", command, err, out.String(), errb.String())
	}
	return out.String(), nil
}

func (h *harness) add(c *container) string {
	h.t.Helper()
	out, err := h.cnitool(c, "add")
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) del(c *container) {
	h.t.Helper()
	if _, err := h.cnitool(c, "del"); err != nil {
		h.t.Fatal(err)
	}
}

// links lists the container's interfaces by name.
func (c *container) links(t *testing.T) map[string]netlink.Link {
	t.Helper()
	out := map[string]netlink.Link{}
	err := c.ns.Do(func(ns.NetNS) error {
		ls, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range ls {
			out[l.Attrs().Name] = l
		}
		return nil
	})
	must(t, err)
	return out
}

// addrs lists the IPv4/IPv6 addresses (CIDR form) on one interface.
func (c *container) addrs(t *testing.T, ifName string) []string {
	t.Helper()
	var out []string
	err := c.ns.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		for _, a := range as {
			if a.IP.IsGlobalUnicast() {
				out = append(out, a.IPNet.String())
			}
		}
		return err
	})
	must(t, err)
	sort.Strings(out)
	return out
}

func ifNames(links map[string]netlink.Link) []string {
	var out []string
	for n := range links {
		if n != "lo" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// statusEntry is what tests read of network-status.
type statusEntry struct {
	Name      string         `json:"name"`
	Interface string         `json:"interface"`
	IPs       []string       `json:"ips"`
	MAC       string         `json:"mac"`
	Default   bool           `json:"default"`
	DNS       map[string]any `json:"dns"`
}

func (h *harness) status(namespace, name string) []statusEntry {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.manifests, "status", namespace+"_"+name+".json"))
	must(h.t, err)
	var out []statusEntry
	must(h.t, json.Unmarshal(b, &out))
	return out
}

func (h *harness) statusExists(namespace, name string) bool {
	_, err := os.Stat(filepath.Join(h.manifests, "status", namespace+"_"+name+".json"))
	return err == nil
}

// hostVeths lists host-side veth names (the bridge plugin's).
func hostVeths(t *testing.T) map[string]bool {
	t.Helper()
	ls, err := netlink.LinkList()
	must(t, err)
	out := map[string]bool{}
	for _, l := range ls {
		if l.Type() == "veth" {
			out[l.Attrs().Name] = true
		}
	}
	return out
}

// assertNoLeaks checks, after DEL or a failed ADD: no host veth beyond
// those present before, no IPAM lease, no record, no libcni cache entry.
func (h *harness) assertNoLeaks(before map[string]bool) {
	h.t.Helper()
	for v := range hostVeths(h.t) {
		if !before[v] {
			h.t.Errorf("leaked host interface %s", v)
		}
	}
	_ = filepath.WalkDir(h.ipamDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), "last_reserved_ip") && d.Name() != "lock" {
			b, _ := os.ReadFile(p)
			h.t.Errorf("leaked IPAM lease %s (%s)", p, strings.TrimSpace(string(b)))
		}
		return nil
	})
	for _, sub := range []string{"records", "results", "locks"} {
		entries, _ := os.ReadDir(filepath.Join(h.cacheDir, sub))
		for _, e := range entries {
			h.t.Errorf("leaked %s entry %s", sub, e.Name())
		}
	}
}

// cniError is the JSON error a plugin prints.
type cniError struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// plugin invokes plexus directly, as a runtime does, to see the exact
// error code (cnitool shows only the message). It uses the container ID
// "direct-<name>".
func (h *harness) plugin(c *container, command string) (string, *cniError) {
	h.t.Helper()
	conf, err := json.Marshal(h.plexus)
	must(h.t, err)
	cmd := exec.Command(filepath.Join(binDir, "plexus"))
	cmd.Env = append(os.Environ(),
		"CNI_COMMAND="+command, "CNI_CONTAINERID=direct-"+c.name, "CNI_NETNS="+c.ns.Path(),
		"CNI_IFNAME=eth0", "CNI_PATH="+binDir,
		fmt.Sprintf("CNI_ARGS=K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s", c.namespace, c.name),
	)
	cmd.Stdin = bytes.NewReader(conf)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		var e cniError
		if jerr := json.Unmarshal(out.Bytes(), &e); jerr != nil {
			h.t.Fatalf("plexus %s failed without a JSON error: %v: %s", command, err, out.String())
		}
		return out.String(), &e
	}
	return out.String(), nil
}

// pluginStdin runs a command without a container (GC, STATUS); extra JSON
// keys in stdin are merged into plexus's config.
func (h *harness) pluginStdin(t *testing.T, command, extra string) string {
	t.Helper()
	out, e := h.pluginStdinErr(command, extra)
	if e != nil {
		t.Fatalf("plexus %s: %+v", command, e)
	}
	return out
}

func (h *harness) pluginStdinErr(command, extra string) (string, *cniError) {
	conf := map[string]any{}
	for k, v := range h.plexus {
		conf[k] = v
	}
	if extra != "" {
		var m map[string]any
		must(h.t, json.Unmarshal([]byte(extra), &m))
		for k, v := range m {
			conf[k] = v
		}
	}
	b, err := json.Marshal(conf)
	must(h.t, err)
	cmd := exec.Command(filepath.Join(binDir, "plexus"))
	cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_PATH="+binDir)
	cmd.Stdin = bytes.NewReader(b)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		var e cniError
		if jerr := json.Unmarshal(out.Bytes(), &e); jerr != nil {
			h.t.Fatalf("plexus %s failed without a JSON error: %v: %s", command, err, out.String())
		}
		return out.String(), &e
	}
	return out.String(), nil
}
