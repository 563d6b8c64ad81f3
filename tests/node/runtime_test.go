package node

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// spyCall is one line of cnispy's log.
type spyCall struct {
	Command           string            `json:"command"`
	ContainerID       string            `json:"containerID"`
	Netns             string            `json:"netns"`
	IfName            string            `json:"ifName"`
	Args              string            `json:"args"`
	RuntimeConfigKeys []string          `json:"runtimeConfigKeys"`
	PodAnnotations    map[string]string `json:"podAnnotations"`
	HasPrevResult     bool              `json:"hasPrevResult"`
}

func readSpyLog(t *testing.T, path string) []spyCall {
	t.Helper()
	f, err := os.Open(path)
	harness.Must(t, err)
	defer f.Close()
	var calls []spyCall
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c spyCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("cnispy log %s: %v: %s", path, err, sc.Text())
		}
		calls = append(calls, c)
	}
	harness.Must(t, sc.Err())
	return calls
}

// spyCalls are the calls of one command for one container in the log.
func spyCalls(t *testing.T, path, command, containerID string) []spyCall {
	t.Helper()
	var out []spyCall
	for _, c := range readSpyLog(t, path) {
		if c.Command == command && c.ContainerID == containerID {
			out = append(out, c)
		}
	}
	return out
}

// argKeys are CNI_ARGS's keys in the order the runtime sent them.
func argKeys(args string) []string {
	var keys []string
	for _, kv := range strings.Split(args, ";") {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}

// testRuntimeCalls records what containerd's CRI sends plexus over a pod's
// life (cnispy in front of plexus) and checks the parts plexus
// relies on: the ADD's CNI_ARGS name the pod and its UID, its netns is the
// sandbox's, and the pod's delete sends DEL for the same container.
func testRuntimeCalls(t *testing.T, n *Node) {
	w := n.PlexusWorld()
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.InstallSpy(w, spyLog)
	const ns = "thin-calls"
	bridgeNADs(t, n, w, ns, "blue")
	before := harness.HostVeths(t)
	pod := n.RunPod(ns, "pod-a", "blue")
	assertAttached(t, n, pod, []attachment{{DefaultNetwork, "eth0"}, {ns + "/blue", "net1"}})
	sb := n.ReadySandbox(pod)
	n.DeletePod(ns, "pod-a")
	assertCleanedUp(t, w, before, sb.ID)

	calls := readSpyLog(t, spyLog)
	var adds, dels []spyCall
	for _, c := range calls {
		t.Logf("containerd -> plexus: %s container=%s netns=%q ifName=%s CNI_ARGS=%q runtimeConfig keys=%v prevResult=%v pod-annotations=%d",
			c.Command, c.ContainerID, c.Netns, c.IfName, c.Args, c.RuntimeConfigKeys, c.HasPrevResult, len(c.PodAnnotations))
		if c.ContainerID != sb.ID {
			continue
		}
		switch c.Command {
		case "ADD":
			adds = append(adds, c)
		case "DEL":
			dels = append(dels, c)
		}
	}
	if len(adds) != 1 {
		t.Fatalf("containerd sent %d ADDs for sandbox %s, want 1", len(adds), sb.ID)
	}
	add := adds[0]
	if add.Netns != sb.Netns || !strings.HasPrefix(add.Netns, n.Dir+"/") {
		t.Errorf("ADD's CNI_NETNS %q, want the sandbox's %q under the node's state directory", add.Netns, sb.Netns)
	}
	if add.IfName != "eth0" {
		t.Errorf("ADD's CNI_IFNAME %q, want eth0", add.IfName)
	}
	for _, kv := range []string{"IgnoreUnknown=1", "K8S_POD_NAMESPACE=" + ns, "K8S_POD_NAME=pod-a",
		"K8S_POD_INFRA_CONTAINER_ID=" + sb.ID, "K8S_POD_UID=" + string(pod.UID)} {
		if !strings.Contains(";"+add.Args+";", ";"+kv+";") {
			t.Errorf("ADD's CNI_ARGS %q lack %s", add.Args, kv)
		}
	}
	// containerd builds CNI_ARGS from a map: the keys' order is not fixed
	// and differs from call to call, so plexus must not rely on it.
	orders := map[string]bool{}
	for _, c := range append(adds, dels...) {
		orders[strings.Join(argKeys(c.Args), ";")] = true
	}
	t.Logf("CNI_ARGS key orders over the sandbox's %d calls: %v", len(adds)+len(dels), slices.Sorted(maps.Keys(orders)))
	// containerd (1.6 and 2.x) hands the pod's annotations to a config
	// declaring the capability: plexus could read the selection from there.
	if got := add.PodAnnotations[NetworksAnnotation]; got != "blue" {
		t.Errorf("ADD's runtimeConfig %s: %s = %q, want %q (keys sent: %v)",
			PodAnnotationsCapability, NetworksAnnotation, got, "blue", add.RuntimeConfigKeys)
	}
	if len(dels) == 0 {
		t.Fatalf("containerd sent no DEL for sandbox %s", sb.ID)
	}
	if dels[0].Netns != sb.Netns {
		t.Errorf("first DEL's CNI_NETNS %q, want the sandbox's %q", dels[0].Netns, sb.Netns)
	}
	var emptyNetns int
	for _, d := range dels {
		if d.Netns == "" {
			emptyNetns++
		}
	}
	t.Logf("containerd sent %d DELs for the sandbox, %d of them with CNI_NETNS=\"\"", len(dels), emptyNetns)
}

// CNIVersion110 is the newest cniVersion: containerd 2.x and CRI-O accept
// a 1.1.0 result and send STATUS or GC for a 1.1.0 config; containerd 1.6
// rejects it (CNIVersion).
const CNIVersion110 = "1.1.0"

// runtimeBehaviour is one thing runtimes do differently that matters to
// plexus: its test checks it on a node of the runtime, expecting what the
// runtime's traits say.
type runtimeBehaviour struct {
	name string
	test func(t *testing.T, node *Node, tr traits)
}

// runtimeBehaviours are TestRuntimes' subtests, on every runtime but
// those whose traits skip them.
var runtimeBehaviours = []runtimeBehaviour{
	// The runtime's libcni accepts a 1.1.0 result: with plexus's config at
	// 1.1.0 a pod runs on all its networks and is deleted cleanly.
	{"CNIVersion110", testCNIVersion110},
	// For a 1.1.0 config the runtime sends STATUS on every CRI Status call
	// and reports the network not ready while it fails: in thick mode a
	// plexusd outage makes the node NotReady until plexusd is back.
	{"CNIStatus", testCNIStatus},
	// Across a pod's life and a restart of the runtime, CNI GC (for a
	// 1.1.0 config) comes only at the runtime's start, if at all, and
	// spares the running pod. Without it (containerd 2.x) plexusd's own
	// collection (TestThickGCCollectsLostSandbox) stays needed.
	{"GCAtStart", testGCAtStart},
	// A deleted pod's sandbox gets a DEL when it is stopped, with the
	// netns and the cached result as prevResult, and, where the runtime
	// does so, another when it is removed (netns gone): plexus answers
	// them all and nothing is left.
	{"DELsPerSandbox", testDELsPerSandbox},
	// The runtime's DEL uses the network config the ADD used, kept in its
	// libcni cache, not the conf dir's current one: a pod added by plexus
	// gets its DEL from plexus even after the conf dir changed to the
	// default network alone.
	{"DELWithCachedConfig", testDELWithCachedConfig},
	// The runtime checks every ADD at once: a CNI CHECK with the ADD's
	// result as prevResult, failing the sandbox if CHECK fails. plexus
	// answers it in thin mode and, through the shim, in thick mode.
	{"CheckAfterAdd", func(t *testing.T, node *Node, _ traits) {
		n := node.With(t)
		testCheckAfterAdd(t, n, n.PlexusWorld(), "check")
	}},
	{"CheckAfterAddThick", func(t *testing.T, node *Node, _ traits) {
		n, w, d := thickNode(t, node)
		t.Cleanup(func() { logOnFailure(t, d) })
		testCheckAfterAdd(t, n, w, "check-thick")
	}},
	// plexusd finds a running sandbox's network namespace in the verbose
	// PodSandboxStatus (cmd/internal/cri): the runtime spec there carries
	// its path, with or without an infra container (CRI-O's
	// drop_infra_ctr: namespaces pinned by pinns, no pause process).
	{"SandboxStatusNetns", testSandboxStatusNetns},
	// The runtime reports the sandbox image pinned, so kubelet's image GC
	// never removes the image every sandbox runs.
	{"PinnedPauseImage", testPinnedPauseImage},
}

// TestRuntimes checks, on a node of each runtime, what the runtimes do
// differently that matters to plexus: one subtest per behaviour
// (runtimeBehaviours), expecting what the runtime's traits say. The rest
// of the node tests run on each runtime too (make test-runtimes).
func TestRuntimes(t *testing.T) {
	for _, rt := range runtimes {
		t.Run(string(rt.Name()), func(t *testing.T) {
			tr := rt.traits()
			checkSkips(t, tr)
			env := kubeenv.ForTest(t, kubeenv.Options{})
			node := Start(t, env, Options{Name: "node-" + string(rt.Name()), Runtime: rt.Name()})
			for _, b := range runtimeBehaviours {
				t.Run(b.name, func(t *testing.T) {
					if why, ok := tr.skips[b.name]; ok {
						t.Skip(why)
					}
					b.test(t, node, tr)
				})
			}
		})
	}
}

// checkSkips fails t when a runtime's skips name no behaviour: a renamed
// behaviour would otherwise run where it does not apply.
func checkSkips(t *testing.T, tr traits) {
	t.Helper()
	for name := range tr.skips {
		if !slices.ContainsFunc(runtimeBehaviours, func(b runtimeBehaviour) bool { return b.name == name }) {
			t.Errorf("skips name %q, which is no behaviour of TestRuntimes", name)
		}
	}
}

// installPlexusAt is InstallPlexus (InstallSpy when spy is set) with the
// conflist at cniVersion version.
func (n *Node) installPlexusAt(w *harness.World, spy map[string]any, version string) {
	n.t.Helper()
	var list map[string]any
	harness.Must(n.t, json.Unmarshal(n.plexusConflist(w, spy), &list))
	list["cniVersion"] = version
	data, err := json.MarshalIndent(list, "", "  ")
	harness.Must(n.t, err)
	n.writeCNIConfig("00-plexus.conflist", data, PlexusNetwork)
}

// installSpyAt is InstallSpy at cniVersion version.
func (n *Node) installSpyAt(w *harness.World, logPath, version string) {
	n.t.Helper()
	n.installPlexusAt(w, map[string]any{"type": "cnispy", "cnispyType": w.Plexus["type"], "cnispyLog": logPath}, version)
}

// runSpiedPod runs a pod selecting two bridge networks in namespace ns
// through plexus behind the CNI spy, which logs every call the runtime
// makes to spyLog.
func runSpiedPod(t *testing.T, n *Node, ns string) (w *harness.World, spyLog string, p *selectingPod) {
	t.Helper()
	w = n.PlexusWorld()
	spyLog = filepath.Join(w.Dir, "cnispy.log")
	n.InstallSpy(w, spyLog)
	return w, spyLog, runSelectingPod(t, n, w, ns)
}

// waitSpyCommand waits until cnispy's log holds a call of command.
func waitSpyCommand(t *testing.T, path, command string) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		if countSpy(t, path, command) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runtime sent no %s within %s", command, readyTimeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// countSpy is the number of calls of command in cnispy's log.
func countSpy(t *testing.T, path, command string) int {
	t.Helper()
	var c int
	for _, call := range readSpyLog(t, path) {
		if call.Command == command {
			c++
		}
	}
	return c
}

// waitNotReady waits until the node is not Ready for a reason containing
// substr, and returns that reason.
func (n *Node) waitNotReady(substr string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), readyTimeout)
	defer cancel()
	last := ""
	for {
		last = n.readiness(ctx)
		if strings.Contains(last, substr) {
			return last
		}
		if ctx.Err() != nil {
			n.t.Fatalf("node %s did not become NotReady with %q within %s (last: %q)", n.Name, substr, readyTimeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func testCNIVersion110(t *testing.T, node *Node, _ traits) {
	n := node.With(t)
	w := n.PlexusWorld()
	n.installPlexusAt(w, nil, CNIVersion110)
	podWithSelections(t, n, w, "v110")
}

func testCNIStatus(t *testing.T, node *Node, _ traits) {
	n, w, d := thickNode(t, node)
	t.Cleanup(func() { logOnFailure(t, d) })
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.installSpyAt(w, spyLog, CNIVersion110)
	waitSpyCommand(t, spyLog, "STATUS")

	d.Stop()
	why := n.waitNotReady("NetworkReady=false")
	t.Logf("plexusd stopped: %s", why)
	d.Start()
	n.WaitReady()
}

func testGCAtStart(t *testing.T, node *Node, tr traits) {
	n := node.With(t)
	w := n.PlexusWorld()
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.installSpyAt(w, spyLog, CNIVersion110)
	p := runSelectingPod(t, n, w, "gc")
	if gcs := countSpy(t, spyLog, "GC"); gcs != 0 {
		t.Fatalf("the runtime sent %d GCs before its restart, want none", gcs)
	}
	n.StopContainerd()
	n.StartContainerd()
	n.WaitReady()
	if tr.gcAtStart {
		waitSpyCommand(t, spyLog, "GC")
		if dels := spyCalls(t, spyLog, "DEL", p.sb.ID); len(dels) != 0 {
			t.Fatalf("the runtime's collection sent %d DELs for the running sandbox %s", len(dels), p.sb.ID)
		}
	}
	assertAttached(t, n, n.GetPod(p.ns, p.pod.Name), threeNetworks(p.ns))
	p.deleteAndCheck(t)
	if tr.gcAtStart {
		return
	}
	// STATUS follows the restart too: the runtime did talk to plexus.
	waitSpyCommand(t, spyLog, "STATUS")
	counts := map[string]int{}
	for _, c := range readSpyLog(t, spyLog) {
		counts[c.Command]++
	}
	t.Logf("the runtime's calls: %v", counts)
	if counts["GC"] != 0 {
		t.Errorf("the runtime sent %d GC calls: plexus's docs and plexusd's collection assume none", counts["GC"])
	}
}

func testDELsPerSandbox(t *testing.T, node *Node, tr traits) {
	n := node.With(t)
	_, spyLog, p := runSpiedPod(t, n, "dels")
	p.deleteAndCheck(t)

	dels := spyCalls(t, spyLog, "DEL", p.sb.ID)
	switch {
	case tr.delAtRemoval && len(dels) < 2:
		t.Fatalf("the runtime sent %d DELs for sandbox %s, want one at stop and one at removal", len(dels), p.sb.ID)
	case !tr.delAtRemoval && len(dels) != 1:
		t.Fatalf("the runtime sent %d DELs for sandbox %s, want 1 (at stop)", len(dels), p.sb.ID)
	}
	if first := dels[0]; first.Netns != p.sb.Netns || !first.HasPrevResult {
		t.Errorf("first DEL: netns %q prevResult %v, want the sandbox's %q and the cached result", first.Netns, first.HasPrevResult, p.sb.Netns)
	}
	if last := dels[len(dels)-1]; tr.delAtRemoval && last.Netns != "" {
		t.Errorf("last DEL's CNI_NETNS %q, want none (the namespace is gone)", last.Netns)
	}
}

func testDELWithCachedConfig(t *testing.T, node *Node, _ traits) {
	n := node.With(t)
	w, spyLog, p := runSpiedPod(t, n, "cached")
	n.InstallDefault(w)
	p.deleteAndCheck(t)
	if dels := spyCalls(t, spyLog, "DEL", p.sb.ID); len(dels) != 1 {
		t.Errorf("plexus got %d DELs for sandbox %s after the conf dir changed, want 1", len(dels), p.sb.ID)
	}
}

func testCheckAfterAdd(t *testing.T, n *Node, w *harness.World, ns string) {
	spyLog := filepath.Join(w.Dir, "cnispy.log")
	n.InstallSpy(w, spyLog)
	p := runSelectingPod(t, n, w, ns)
	adds := spyCalls(t, spyLog, "ADD", p.sb.ID)
	checks := spyCalls(t, spyLog, "CHECK", p.sb.ID)
	if len(adds) != 1 || len(checks) != 1 {
		t.Fatalf("the runtime sent %d ADDs and %d CHECKs for sandbox %s, want 1 and 1", len(adds), len(checks), p.sb.ID)
	}
	if c := checks[0]; c.Netns != p.sb.Netns || !c.HasPrevResult || c.IfName != "eth0" {
		t.Errorf("CHECK: netns %q ifName %q prevResult %v, want the sandbox's %q, eth0 and the ADD's result", c.Netns, c.IfName, c.HasPrevResult, p.sb.Netns)
	}
	p.deleteAndCheck(t)
}

func testSandboxStatusNetns(t *testing.T, node *Node, tr traits) {
	n := node.With(t)
	w := n.PlexusWorld()
	n.InstallPlexus(w)
	p := runSelectingPod(t, n, w, "netns")
	switch pid := p.sb.PID; {
	case tr.infraContainer && pid == 0:
		t.Errorf("sandbox %s has no pause process", p.sb.ID)
	case !tr.infraContainer && pid != 0:
		t.Errorf("sandbox %s has a pause process %d: CRI-O's drop_infra_ctr is off?", p.sb.ID, pid)
	}
	got := n.inspectSandbox(p.sb.ID).Netns // as the runtime reports it now
	if got != p.sb.Netns || !strings.HasPrefix(got, n.NetnsDir()+"/") {
		t.Errorf("netns %q, want the sandbox's %q under %s", got, p.sb.Netns, n.NetnsDir())
	}
	p.deleteAndCheck(t)
}

func testPinnedPauseImage(t *testing.T, node *Node, _ traits) {
	n := node.With(t)
	out, err := n.Crictl(t.Context(), "images", "-o", "json")
	harness.Must(t, err)
	var list struct {
		Images []struct {
			RepoTags []string `json:"repoTags"`
			Pinned   bool     `json:"pinned"`
		} `json:"images"`
	}
	harness.Must(t, json.Unmarshal([]byte(out), &list))
	for _, img := range list.Images {
		for _, tag := range img.RepoTags {
			if tag == PauseImage {
				if !img.Pinned {
					t.Errorf("%s is not pinned", PauseImage)
				}
				return
			}
		}
	}
	t.Fatalf("%s not among the CRI's images: %s", PauseImage, out)
}
