package node

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
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
