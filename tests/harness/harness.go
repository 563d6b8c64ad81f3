// Package harness drives plexus as a container runtime does: libcni as
// cnitool runs it (or a direct exec) in real network namespaces, with the
// reference plugins, a default bridge network and a manifests source, plus
// leak checks.
package harness

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

// BinDir holds plexus and the reference plugins, built once.
var BinDir string

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
	"github.com/containernetworking/plugins/plugins/meta/portmap",
}

// Main builds the binaries and runs the tests; call it from TestMain.
func Main(m *testing.M) int { return MainBuilding(m) }

// plexusMains are plexus's binaries the tests run: the plugin, plexusd and
// the shim.
var plexusMains = []string{
	"github.com/plexus-cni/plexus/cmd/plexus", "github.com/plexus-cni/plexus/cmd/plexusd",
	"github.com/plexus-cni/plexus/cmd/plexus-shim",
}

func build(dir string) error {
	if pre := os.Getenv("PLEXUS_BIN"); pre != "" {
		// make test builds once into bin/ and points the tests at it.
		for _, f := range append(slices.Clone(plexusMains), referencePlugins...) {
			src := filepath.Join(pre, filepath.Base(f))
			if err := os.Symlink(src, filepath.Join(dir, filepath.Base(f))); err != nil {
				return err
			}
		}
		return nil
	}
	args := append(append([]string{"build", "-o", dir + "/"}, plexusMains...), referencePlugins...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build does
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building plugins: %w", err)
	}
	return nil
}

// World is one test's world: a plexus config, manifests, a default
// bridge network, a cache dir and an IPAM data dir, all under t.TempDir.
type World struct {
	t         testing.TB
	Dir       string
	NetConf   string // the directory of CNITool's network config
	Manifests string
	ConfDir   string
	CacheDir  string
	IPAMDir   string
	bridges   []string
	// containers are the sandboxes made by Container, for leak checks.
	containers []*Container
	// Plexus is plexus's config; change it with Set.
	Plexus map[string]any
}

// New builds a World; everything it creates is removed when t ends.
func New(t testing.TB) *World {
	t.Helper()
	dir := t.TempDir()
	h := &World{
		t: t, Dir: dir,
		NetConf:   filepath.Join(dir, "netconf"),
		Manifests: filepath.Join(dir, "manifests"),
		ConfDir:   filepath.Join(dir, "confdir"),
		CacheDir:  filepath.Join(dir, "cache"),
		IPAMDir:   filepath.Join(dir, "ipam"),
	}
	for _, d := range []string{h.NetConf, h.Manifests, h.ConfDir, h.IPAMDir} {
		Must(t, os.MkdirAll(d, 0o755))
	}
	defaultBr := h.Bridge()
	h.WriteFile(filepath.Join(dir, "default.conflist"), h.BridgeConf("cluster-default", defaultBr, "1.0.0", true))
	h.Plexus = map[string]any{
		"cniVersion":     "1.0.0",
		"name":           "plexus",
		"type":           "plexus",
		"clusterNetwork": filepath.Join(dir, "default.conflist"),
		"manifests":      h.Manifests,
		"confDir":        h.ConfDir,
		"cacheDir":       h.CacheDir,
		"binDir":         BinDir,
		"logFile":        filepath.Join(dir, "plexus.log"),
		"logLevel":       "debug",
	}
	h.WritePlexus()
	t.Cleanup(h.cleanupBridges)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "plexus.log"))
			t.Logf("plexus.log:\n%s", b)
		}
	})
	return h
}

func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *World) WriteFile(path, content string) {
	h.t.Helper()
	Must(h.t, os.WriteFile(path, []byte(content), 0o644))
}

// Set changes a plexus config key (nil removes it) and rewrites the config.
func (h *World) Set(key string, v any) {
	if v == nil {
		delete(h.Plexus, key)
	} else {
		h.Plexus[key] = v
	}
	h.WritePlexus()
}

func (h *World) WritePlexus() {
	b, err := json.Marshal(h.Plexus)
	Must(h.t, err)
	h.WriteFile(filepath.Join(h.NetConf, "00-plexus.conf"), string(b))
}

// bridge returns a fresh bridge name, removed when the test ends.
func (h *World) Bridge() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "pxb" + hex.EncodeToString(b)
	h.bridges = append(h.bridges, name)
	return name
}

func (h *World) cleanupBridges() {
	for _, b := range h.bridges {
		if l, err := netlink.LinkByName(b); err == nil {
			_ = netlink.LinkDel(l)
		}
	}
}

// Subnet returns a fresh /24.
func Subnet() string {
	n := subnetSeq.Add(1)
	return fmt.Sprintf("10.%d.%d.0/24", 100+n/250, n%250)
}

// bridgeConf is a bridge + host-local conflist (optionally with tuning and
// bandwidth, so capabilities are exercised).
func (h *World) BridgeConf(name, br, cniVersion string, withBandwidth bool) string {
	plugins := []any{map[string]any{
		"type": "bridge", "bridge": br, "isGateway": true,
		"ipam": map[string]any{"type": "host-local", "subnet": Subnet(), "dataDir": h.IPAMDir},
	}}
	if withBandwidth {
		plugins = append(plugins, map[string]any{"type": "bandwidth", "capabilities": map[string]any{"bandwidth": true}})
	}
	b, _ := json.Marshal(map[string]any{"cniVersion": cniVersion, "name": name, "plugins": plugins})
	return string(b)
}

// nad writes a NetworkAttachmentDefinition manifest.
func (h *World) NAD(namespace, name, config string) {
	cfg, _ := json.Marshal(config)
	h.WriteFile(filepath.Join(h.Manifests, "nad-"+namespace+"-"+name+".yaml"), fmt.Sprintf(
		"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  config: %s\n",
		name, namespace, cfg))
}

// bridgeNAD writes a NAD for a fresh bridge network with host-local IPAM.
func (h *World) BridgeNAD(namespace, name string) {
	h.NAD(namespace, name, h.BridgeNADConfig(name))
}

// BridgeNADConfig is the spec.config of a NAD for a fresh bridge network
// with host-local IPAM, for tests that create NADs through the API.
func (h *World) BridgeNADConfig(name string) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(h.BridgeConf(name, h.Bridge(), "1.0.0", false)), &m)
	plugin := m["plugins"].([]any)[0].(map[string]any)
	plugin["cniVersion"], plugin["name"] = "1.0.0", name
	b, _ := json.Marshal(plugin)
	return string(b)
}

// pod writes a Pod manifest with the selection annotation.
func (h *World) Pod(namespace, name, networks string) {
	ann, _ := json.Marshal(networks)
	h.WriteFile(filepath.Join(h.Manifests, "pod-"+namespace+"-"+name+".yaml"), fmt.Sprintf(
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  uid: uid-%s\n  annotations:\n    k8s.v1.cni.cncf.io/networks: %s\nspec:\n  nodeName: node1\n",
		name, namespace, name, ann))
}

func (h *World) RemovePod(namespace, name string) {
	Must(h.t, os.Remove(filepath.Join(h.Manifests, "pod-"+namespace+"-"+name+".yaml")))
}

// cniArgs is what kubelet sends; a direct exec leaves out IgnoreUnknown
// to prove plexus adds it for its delegates.
func (c *Container) cniArgs(ignoreUnknown bool) string {
	s := fmt.Sprintf("K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=x", c.Namespace, c.Name)
	if c.UID != "" {
		s += ";K8S_POD_UID=" + c.UID
	}
	if ignoreUnknown {
		s = "IgnoreUnknown=1;" + s
	}
	return s
}

// container is a network namespace standing in for a pod sandbox.
type Container struct {
	NS        ns.NetNS
	Namespace string
	Name      string
	// UID is sent as K8S_POD_UID; "" sends none.
	UID string
	// Env is added to the runtime's environment (CAP_ARGS, ...).
	Env []string
}

func (h *World) Container(namespace, name string) *Container {
	h.t.Helper()
	n, err := testutils.NewNS()
	Must(h.t, err)
	h.t.Cleanup(func() {
		n.Close()
		_ = testutils.UnmountNS(n)
	})
	c := &Container{NS: n, Namespace: namespace, Name: name, UID: "uid-" + name}
	h.containers = append(h.containers, c)
	return c
}

func (h *World) Add(c *Container) string {
	h.t.Helper()
	out, err := h.CNITool(c, "add")
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *World) Del(c *Container) {
	h.t.Helper()
	if _, err := h.CNITool(c, "del"); err != nil {
		h.t.Fatal(err)
	}
}

// links lists the container's interfaces by name.
func (c *Container) Links(t testing.TB) map[string]netlink.Link {
	t.Helper()
	out := map[string]netlink.Link{}
	err := c.NS.Do(func(ns.NetNS) error {
		ls, err := linkList()
		if err != nil {
			return err
		}
		for _, l := range ls {
			out[l.Attrs().Name] = l
		}
		return nil
	})
	Must(t, err)
	return out
}

// addrs lists the IPv4/IPv6 addresses (CIDR form) on one interface.
func (c *Container) Addrs(t testing.TB, ifName string) []string {
	t.Helper()
	var out []string
	err := c.NS.Do(func(ns.NetNS) error {
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
	Must(t, err)
	sort.Strings(out)
	return out
}

// IPs lists the IPv4/IPv6 addresses on one interface without their prefix
// length, as network-status lists them (s5.3.3), sorted.
func (c *Container) IPs(t testing.TB, ifName string) []string {
	t.Helper()
	var out []string
	for _, a := range c.Addrs(t, ifName) {
		p, err := netip.ParsePrefix(a)
		Must(t, err)
		out = append(out, p.Addr().Unmap().String())
	}
	sort.Strings(out)
	return out
}

func IfNames(links map[string]netlink.Link) []string {
	var out []string
	for n := range links {
		if n != "lo" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// StatusEntry is what tests read of network-status.
type StatusEntry struct {
	Name      string         `json:"name"`
	Interface string         `json:"interface"`
	IPs       []string       `json:"ips"`
	MAC       string         `json:"mac"`
	Default   bool           `json:"default"`
	DNS       map[string]any `json:"dns"`
}

// Addrs parses the entry's "ips", failing t for a value that is not an
// address (s5.3.3: a prefix such as "10.0.0.2/24" is not).
func (e StatusEntry) Addrs(t testing.TB) []netip.Addr {
	t.Helper()
	out := make([]netip.Addr, 0, len(e.IPs))
	for _, s := range e.IPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("network-status %s (%s): ips value %q: %v", e.Name, e.Interface, s, err)
		}
		out = append(out, a)
	}
	return out
}

func (h *World) Status(namespace, name string) []StatusEntry {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.Manifests, "status", namespace+"_"+name+".json"))
	Must(h.t, err)
	var out []StatusEntry
	Must(h.t, json.Unmarshal(b, &out))
	return out
}

func (h *World) StatusExists(namespace, name string) bool {
	_, err := os.Stat(filepath.Join(h.Manifests, "status", namespace+"_"+name+".json"))
	return err == nil
}

// HostVeths lists host-side veth names (the bridge plugin's).
func HostVeths(t testing.TB) map[string]bool {
	t.Helper()
	ls, err := linkList()
	Must(t, err)
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
func (h *World) AssertNoLeaks(before map[string]bool) {
	h.t.Helper()
	for _, v := range h.NewVeths(before) {
		h.t.Errorf("leaked host interface %s", v)
	}
	_ = filepath.WalkDir(h.IPAMDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), "last_reserved_ip") && d.Name() != "lock" {
			b, _ := os.ReadFile(p)
			h.t.Errorf("leaked IPAM lease %s (%s)", p, strings.TrimSpace(string(b)))
		}
		return nil
	})
	for _, sub := range []string{"records", "results", "locks"} {
		entries, _ := os.ReadDir(filepath.Join(h.CacheDir, sub))
		for _, e := range entries {
			h.t.Errorf("leaked %s entry %s", sub, e.Name())
		}
	}
}

// CNIError is the JSON error a plugin prints.
type CNIError struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details"`
}

// pluginCmd is the plugin of plexus's config (plexus, or plexus-shim in
// thick mode) invoked as a runtime does.
func (h *World) pluginCmd(c *Container, command, containerID string) *exec.Cmd {
	conf, err := json.Marshal(h.Plexus)
	Must(h.t, err)
	typ, _ := h.Plexus["type"].(string)
	cmd := exec.Command(filepath.Join(BinDir, typ))
	cmd.Env = append(os.Environ(), h.tag(),
		"CNI_COMMAND="+command, "CNI_CONTAINERID="+containerID, "CNI_NETNS="+c.NS.Path(),
		"CNI_IFNAME=eth0", "CNI_PATH="+BinDir,
		"CNI_ARGS="+c.cniArgs(false),
	)
	cmd.Stdin = bytes.NewReader(conf)
	return cmd
}

// PluginRusage is Plugin returning the plexus process's resource usage;
// nil usage means the command failed.
func (h *World) PluginRusage(c *Container, command string) (string, *syscall.Rusage) {
	h.t.Helper()
	cmd := h.pluginCmd(c, command, "direct-"+c.Name)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return out.String(), nil
	}
	return out.String(), cmd.ProcessState.SysUsage().(*syscall.Rusage)
}

// plugin invokes plexus directly, as a runtime does, to see the exact
// error code (cnitool shows only the message). It uses the container ID
// "direct-<name>".
func (h *World) Plugin(c *Container, command string) (string, *CNIError) {
	h.t.Helper()
	return h.PluginAs(c, command, "direct-"+c.Name)
}

// PluginAs is Plugin with the runtime's container ID chosen by the test.
func (h *World) PluginAs(c *Container, command, containerID string) (string, *CNIError) {
	h.t.Helper()
	return h.runCNI(h.pluginCmd(c, command, containerID), command)
}

// PluginEdited is Plugin with the environment and config edited first:
// env entries replace the runtime's of the same name ("CNI_PATH=" empties
// one), conf keys replace plexus's.
func (h *World) PluginEdited(c *Container, command string, env []string, conf map[string]any) (string, *CNIError) {
	h.t.Helper()
	cmd := h.pluginCmd(c, command, "direct-"+c.Name)
	cmd.Env = append(cmd.Env, env...) // os/exec keeps the last of a name
	cmd.Stdin = bytes.NewReader(h.plexusWith(conf))
	return h.runCNI(cmd, command)
}

// plexusWith is plexus's config with the keys of extra replaced.
func (h *World) plexusWith(extra map[string]any) []byte {
	conf := map[string]any{}
	for k, v := range h.Plexus {
		conf[k] = v
	}
	for k, v := range extra {
		conf[k] = v
	}
	b, err := json.Marshal(conf)
	Must(h.t, err)
	return b
}

// runCNI runs a plugin and decodes its error document on failure.
func (h *World) runCNI(cmd *exec.Cmd, command string) (string, *CNIError) {
	h.t.Helper()
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		var e CNIError
		if jerr := json.Unmarshal(out.Bytes(), &e); jerr != nil {
			h.t.Fatalf("plexus %s failed without a JSON error: %v: %s", command, err, out.String())
		}
		return out.String(), &e
	}
	return out.String(), nil
}

// pluginStdin runs a command without a container (GC, STATUS); extra JSON
// keys in stdin are merged into plexus's config.
func (h *World) PluginStdin(t testing.TB, command, extra string) string {
	t.Helper()
	out, e := h.PluginStdinErr(command, extra)
	if e != nil {
		t.Fatalf("plexus %s: %+v", command, e)
	}
	return out
}

func (h *World) PluginStdinErr(command, extra string) (string, *CNIError) {
	var m map[string]any
	if extra != "" {
		Must(h.t, json.Unmarshal([]byte(extra), &m))
	}
	cmd := exec.Command(filepath.Join(BinDir, "plexus"))
	cmd.Env = append(os.Environ(), h.tag(), "CNI_COMMAND="+command, "CNI_PATH="+BinDir)
	cmd.Stdin = bytes.NewReader(h.plexusWith(m))
	return h.runCNI(cmd, command)
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Must(t, err)
	return string(b)
}

// Parallel runs f for every container at once and reports each failure.
func Parallel(t testing.TB, cs []*Container, f func(*Container) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(c); err != nil {
				errs <- fmt.Errorf("%s: %w", c.Name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// MainBuilding is Main that also builds extra main packages (test tools
// such as a misbehaving delegate) into BinDir, where plexus finds them by
// type through its binDir.
func MainBuilding(m *testing.M, pkgs ...string) int {
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
	if err := buildTools(dir, pkgs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	BinDir = dir
	return runChecked(m)
}

func buildTools(dir string, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %v: %w", pkgs, err)
	}
	return nil
}

// ProcessesOf lists the live processes whose executable is exe (zombies
// have no executable and are not listed: they hold nothing).
func ProcessesOf(exe string) []int {
	want, err := filepath.EvalSymlinks(exe)
	if err != nil {
		want = exe
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || fmt.Sprint(pid) != e.Name() {
			continue
		}
		got, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.TrimSuffix(got, " (deleted)") == want {
			out = append(out, pid)
		}
	}
	return out
}

// worldEnv tags every process a World starts, and through inherited
// environments every delegate those start, so that tests of other packages
// running at the same time are told apart.
const worldEnv = "PLEXUS_TEST_WORLD"

func (h *World) tag() string { return worldEnv + "=" + h.Dir }

// StrayProcesses lists the live processes started for this World (plexus
// and every delegate it ran) as "pid exe".
func (h *World) StrayProcesses() []string {
	tag := []byte(h.tag())
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append(append([]byte{0}, tag...), 0)) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil { // zombies have no exe and hold nothing
			out = append(out, e.Name()+" "+exe)
		}
	}
	return out
}

// AssertNoStrayProcesses fails the test for every process of this World
// still running: plexus or a delegate that outlived its call.
func (h *World) AssertNoStrayProcesses() {
	h.t.Helper()
	if ps := h.StrayProcesses(); len(ps) > 0 {
		h.t.Errorf("stray processes left running: %s", strings.Join(ps, ", "))
	}
}

// NewVeths lists this World's host veths that were not there before.
func (h *World) NewVeths(before map[string]bool) []string {
	var out []string
	for v := range HostVeths(h.t) {
		if !before[v] && h.ownVeth(v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// ownVeth tells whether a host veth is this World's: enslaved to one of
// its bridges, or with its peer in one of its sandboxes (ptp). Other
// packages' tests run alongside and make veths of their own.
func (h *World) ownVeth(name string) bool {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return false
	}
	if m, err := netlink.LinkByIndex(l.Attrs().MasterIndex); err == nil {
		for _, b := range h.bridges {
			if m.Attrs().Name == b {
				return true
			}
		}
	}
	for _, c := range h.containers {
		id, err := netlink.GetNetNsIdByFd(int(c.NS.Fd()))
		if err == nil && id >= 0 && l.Attrs().NetNsID == id {
			return true
		}
	}
	return false
}

// Running is a plexus invocation started by StartPlugin.
type Running struct {
	Cmd *exec.Cmd
	out bytes.Buffer
}

// StartPlugin starts plexus as Plugin does, without waiting, in a process
// group of its own, so a test can signal it mid-call as a runtime might.
func (h *World) StartPlugin(c *Container, command string) *Running {
	h.t.Helper()
	conf, err := json.Marshal(h.Plexus)
	Must(h.t, err)
	r := &Running{Cmd: exec.Command(filepath.Join(BinDir, "plexus"))}
	r.Cmd.Env = append(os.Environ(), h.tag(),
		"CNI_COMMAND="+command, "CNI_CONTAINERID=direct-"+c.Name, "CNI_NETNS="+c.NS.Path(),
		"CNI_IFNAME=eth0", "CNI_PATH="+BinDir,
		"CNI_ARGS="+c.cniArgs(false),
	)
	r.Cmd.Stdin = bytes.NewReader(conf)
	r.Cmd.Stdout = &r.out
	r.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Must(h.t, r.Cmd.Start())
	h.t.Cleanup(func() {
		// A test that failed half way must not leave plexus behind.
		if r.Cmd.ProcessState == nil {
			_ = syscall.Kill(-r.Cmd.Process.Pid, syscall.SIGKILL)
			_ = r.Cmd.Wait()
		}
	})
	return r
}

// Wait waits for the call to end and returns its output and CNI error;
// err is set when plexus ended without printing a CNI error (killed).
func (r *Running) Wait() (out string, cniErr *CNIError, err error) {
	werr := r.Cmd.Wait()
	if werr == nil {
		return r.out.String(), nil, nil
	}
	var e CNIError
	if jerr := json.Unmarshal(r.out.Bytes(), &e); jerr != nil {
		return r.out.String(), nil, fmt.Errorf("plexus ended without a CNI error: %w: %q", werr, r.out.String())
	}
	return r.out.String(), &e, nil
}

// AssertCNIError checks a failed call's code and that its message names
// every want (errors must say what failed).
func AssertCNIError(t testing.TB, e *CNIError, code uint, want ...string) {
	t.Helper()
	if e == nil {
		t.Fatalf("want CNI error %d naming %q, got success", code, want)
	}
	if e.Code != code {
		t.Errorf("CNI error code %d, want %d: %s", e.Code, code, e.Msg)
	}
	for _, w := range want {
		if !strings.Contains(e.Msg, w) {
			t.Errorf("CNI error %q does not name %q", e.Msg, w)
		}
	}
}

// dumpRetries bounds retries of a link dump that concurrent link changes
// (other tests creating veths) interrupted.
const dumpRetries = 10

// linkList is netlink.LinkList, retried while the kernel reports the dump
// as interrupted; an interrupted dump may miss links.
func linkList() ([]netlink.Link, error) {
	for i := 0; ; i++ {
		ls, err := netlink.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || i == dumpRetries {
			return ls, err
		}
	}
}

// AssertDetached checks a container has no interface left besides lo and
// that nothing leaked (AssertNoLeaks).
func (h *World) AssertDetached(c *Container, before map[string]bool) {
	h.t.Helper()
	if got := IfNames(c.Links(h.t)); len(got) != 0 {
		h.t.Errorf("%s still has interfaces %v", c.Name, got)
	}
	h.AssertNoLeaks(before)
}

// BridgePod is the usual fixture: a bridge NAD for each name in namespace,
// a pod selecting them in order (comma format), its sandbox, and the host's
// veths before anything is attached (for AssertNoLeaks).
func (h *World) BridgePod(namespace, name string, nads ...string) (*Container, map[string]bool) {
	h.t.Helper()
	seen := map[string]bool{}
	for _, n := range nads {
		if !seen[n] {
			h.BridgeNAD(namespace, n)
			seen[n] = true
		}
	}
	h.Pod(namespace, name, strings.Join(nads, ","))
	return h.Container(namespace, name), HostVeths(h.t)
}
