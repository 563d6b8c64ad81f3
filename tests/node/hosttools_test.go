package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// hostToolPlugin is a delegate that needs what plexus's image lacks: a
// shell, and the host's ip. It checks both, then runs the bridge plugin
// beside it.
const hostToolPlugin = `#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
ip link show lo >/dev/null || { echo '{"cniVersion":"1.0.0","code":999,"msg":"no ip"}'; exit 1; }
exec "$(dirname "$0")/bridge"
`

// hostPort is the port the pod asks for on the node; its container port
// is hostPort too.
const hostPort = 30080

// assertHostToolsAndHostPort: with the default network chaining portmap,
// a pod's hostPort serves traffic on the node (portmap runs the host's
// iptables), and a selection whose delegate is a shell script calling the
// host's ip attaches; after the pod is deleted, nothing of it is left:
// interfaces, leases, records, portmap's rules.
func assertHostToolsAndHostPort(t *testing.T, n *Node, d *Deployment, w *harness.World, conf string) {
	t.Helper()
	restore := withPortmapDefault(t, n, d, w, conf)
	defer restore()
	harness.Must(t, os.WriteFile(filepath.Join(n.cniBinDir, "hosttool"), []byte(hostToolPlugin), 0o755))
	nsName := "host-tools"
	harness.Must(t, n.Env.CreateNamespace(t.Context(), nsName, nil))
	cfg := strings.Replace(w.BridgeNADConfig("tool"), `"type":"bridge"`, `"type":"hosttool"`, 1)
	harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, nsName, "tool", cfg))
	before := harness.HostVeths(t)
	natBefore := portmapChains(t)
	removeHostportChainsAfter(t)

	spec := n.PodSpec(nsName, "hostport", "tool")
	spec.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: hostPort, HostPort: hostPort, Protocol: corev1.ProtocolTCP}}
	n.CreatePod(spec)
	pod := n.WaitRunning(nsName, "hostport")
	st := n.NetworkStatus(nsName, "hostport")
	if len(st) != 2 || st[1].Name != nsName+"/tool" {
		t.Errorf("network-status %+v, want the default network and %s/tool (the shell delegate)", st, nsName)
	}
	stop := serveIn(t, n.ReadySandbox(pod).Netns, hostPort)
	gw := gatewayOf(t, pod.Status.PodIP)
	if got := dialHostPort(t, net.JoinHostPort(gw, fmt.Sprint(hostPort))); got != "plexus-hostport" {
		t.Errorf("node %s:%d answered %q, want the pod's listener", gw, hostPort, got)
	}
	stop()
	// CRI-O maps host ports itself and passes no portMappings to CNI; the
	// other runtimes leave it to the default network's portmap.
	if !n.rt.traits().mapsHostPorts && natBefore == portmapChains(t) {
		t.Errorf("portmap added no DNAT chain for the pod's hostPort")
	}
	n.DeletePod(nsName, "hostport")
	w.AssertNoLeaks(before)
	if got := portmapChains(t); got != natBefore {
		t.Errorf("portmap's chains after the pod's deletion:\n%s\nwant as before:\n%s", got, natBefore)
	}
}

// withPortmapDefault rewrites the default network's config with portmap
// chained, waits until plexus's config declares portMappings and
// containerd loaded it, and returns the function that puts the original
// back.
func withPortmapDefault(t *testing.T, n *Node, d *Deployment, w *harness.World, conf string) func() {
	t.Helper()
	path := filepath.Join(n.ConfDir, "10-default.conflist")
	orig, err := os.ReadFile(path)
	harness.Must(t, err)
	var list map[string]any
	harness.Must(t, json.Unmarshal(orig, &list))
	list["plugins"] = append(list["plugins"].([]any), map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}, "snat": true})
	b, err := json.Marshal(list)
	harness.Must(t, err)
	write := func(data []byte) {
		tmp := filepath.Join(n.ConfDir, ".tmp-default")
		harness.Must(t, os.WriteFile(tmp, data, 0o644))
		harness.Must(t, os.Rename(tmp, path))
	}
	write(b)
	d.waitFor(t, "plexus's config with portMappings", func(context.Context) (bool, string) {
		got, err := os.ReadFile(conf)
		return err == nil && strings.Contains(string(got), `"portMappings"`), string(got)
	})
	waitLoaded(t, n, d, PlexusNetwork)
	return func() {
		write(orig)
		d.waitFor(t, "plexus's config without portMappings", func(context.Context) (bool, string) {
			got, err := os.ReadFile(conf)
			return err == nil && !strings.Contains(string(got), "portMappings"), string(got)
		})
	}
}

// serveIn listens on port in the network namespace at netnsPath and
// answers every connection with one line; the returned function stops it.
func serveIn(t *testing.T, netnsPath string, port int) func() {
	t.Helper()
	netns, err := ns.GetNS(netnsPath)
	harness.Must(t, err)
	defer netns.Close()
	var ln net.Listener
	harness.Must(t, netns.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("plexus-hostport\n"))
			c.Close()
		}
	}()
	return func() {
		ln.Close()
		<-done
	}
}

// gatewayOf is the default bridge's address on the node: the first of the
// pod address's /24 (host-local's gateway).
func gatewayOf(t *testing.T, podIP string) string {
	t.Helper()
	ip := net.ParseIP(podIP).To4()
	if ip == nil {
		t.Fatalf("pod IP %q is not IPv4", podIP)
	}
	ip[3] = 1
	return ip.String()
}

// dialHostPort connects to addr from the node and returns the first line.
func dialHostPort(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		t.Errorf("dial %s: %v", addr, err)
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Errorf("read from %s: %v", addr, err)
	}
	return strings.TrimSpace(line)
}

// portmapChains lists the nat table's per-container DNAT chains portmap
// creates (CNI-DN-...), sorted as iptables prints them.
func portmapChains(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables", "-t", "nat", "-S").Output()
	harness.Must(t, err)
	var chains []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-N CNI-DN-") {
			chains = append(chains, l)
		}
	}
	return strings.Join(chains, "\n")
}

// removeHostportChainsAfter removes, when t ends, the nat chains portmap
// creates once per host and never removes (CNI-HOSTPORT-*), with the jumps
// to them, if they were not there before t: the suite leaves the host as
// it found it.
func removeHostportChainsAfter(t *testing.T) {
	t.Helper()
	out, err := exec.Command("iptables", "-t", "nat", "-S").Output()
	harness.Must(t, err)
	if strings.Contains(string(out), "-N CNI-HOSTPORT-") {
		return
	}
	t.Cleanup(func() {
		out, err := exec.Command("iptables", "-t", "nat", "-S").Output()
		if err != nil {
			t.Errorf("iptables -t nat -S: %v", err)
			return
		}
		var chains []string
		for _, l := range strings.Split(string(out), "\n") {
			f := ruleWords(l)
			switch {
			case len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "CNI-HOSTPORT-"):
				chains = append(chains, f[1])
			case len(f) > 2 && f[0] == "-A" && strings.Contains(l, "-j CNI-HOSTPORT-") && !strings.HasPrefix(f[1], "CNI-HOSTPORT-"):
				args := append([]string{"-t", "nat", "-D"}, f[1:]...)
				if b, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
					t.Errorf("iptables %v: %v: %s", args, err, b)
				}
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, c := range chains {
				if b, err := exec.Command("iptables", "-t", "nat", op, c).CombinedOutput(); err != nil {
					t.Errorf("iptables -t nat %s %s: %v: %s", op, c, err, b)
				}
			}
		}
	})
}

// ruleWords splits a line of iptables -S into its words, as a shell
// would: a double-quoted comment is one word, without its quotes.
func ruleWords(line string) []string {
	var words []string
	var w strings.Builder
	quoted, inWord := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

func TestRuleWords(t *testing.T) {
	got := ruleWords(`-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ`)
	want := []string{"-A", "POSTROUTING", "-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", "CNI-HOSTPORT-MASQ"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("ruleWords = %q, want %q", got, want)
	}
}
