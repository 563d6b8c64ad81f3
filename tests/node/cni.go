package node

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/plexus-cni/plexus/tests/harness"
)

// CNIVersion is the cniVersion of every config the node loads: containerd
// 1.6's libcni rejects a 1.1.0 result (the sandbox fails after every
// network was attached).
const CNIVersion = "1.0.0"

// Network names containerd reports for the configs the node installs.
const (
	PlexusNetwork  = "plexus"
	DefaultNetwork = "cluster-default" // harness.World's default network
)

// PlexusWorld is a harness World for plexus on this node: the Kubernetes
// source with the node's admin kubeconfig (no manifests), and the NAD CRD
// of deploy/base applied. Its default network is a bridge with host-local
// IPAM (and bandwidth), its leases in w.IPAMDir, plexus's records in
// w.CacheDir.
func (n *Node) PlexusWorld() *harness.World {
	n.t.Helper()
	n.applyCRD()
	w := harness.New(n.t)
	w.Set("manifests", nil)
	w.Set("kubeconfig", n.Kubeconfig)
	// Before the World's own cleanups (they run last in, first out):
	// its config is still installed and its files still there, so the
	// pods' DELs work.
	n.t.Cleanup(n.Reset)
	return w
}

func (n *Node) applyCRD() {
	n.t.Helper()
	n.crdOnce.Do(func() {
		crd, err := filepath.Abs(filepath.Join("..", "..", "deploy", "base", "crd.yaml"))
		harness.Must(n.t, err)
		if err := n.Env.Apply(n.t.Context(), false, crd); err != nil {
			n.t.Fatalf("apply %s: %v", crd, err)
		}
	})
}

// PodAnnotationsCapability makes containerd hand the pod's annotations to
// a config declaring it (runtimeConfig), so plexus can take the selection
// from there.
const PodAnnotationsCapability = "io.kubernetes.cri.pod-annotations"

// InstallPlexus makes plexus the node's CNI config, as plexus's installer
// writes it: a conflist whose only plugin is w's plexus config (thin, or
// the shim after w.StartDaemon), declaring the default network's
// capabilities and the pod annotations', and waits until containerd uses
// it and the node is Ready.
func (n *Node) InstallPlexus(w *harness.World) {
	n.t.Helper()
	n.writeCNIConfig("00-plexus.conflist", n.plexusConflist(w, nil), PlexusNetwork)
}

// InstallSpy is InstallPlexus with cnispy in front of plexus: every call
// containerd makes is appended to logPath (see cnispy).
func (n *Node) InstallSpy(w *harness.World, logPath string) {
	n.t.Helper()
	spy := map[string]any{"type": "cnispy", "cnispyType": w.Plexus["type"], "cnispyLog": logPath}
	n.writeCNIConfig("00-plexus.conflist", n.plexusConflist(w, spy), PlexusNetwork)
}

// InstallDefault makes w's default network alone the node's CNI config
// (the cluster without plexus) and waits until containerd uses it.
func (n *Node) InstallDefault(w *harness.World) {
	n.t.Helper()
	data, err := os.ReadFile(w.Plexus["clusterNetwork"].(string))
	harness.Must(n.t, err)
	n.writeCNIConfig("10-default.conflist", data, DefaultNetwork)
}

func (n *Node) plexusConflist(w *harness.World, override map[string]any) []byte {
	n.t.Helper()
	plugin := map[string]any{}
	for k, v := range w.Plexus {
		if k != "cniVersion" && k != "name" {
			plugin[k] = v
		}
	}
	for k, v := range override {
		plugin[k] = v
	}
	caps := defaultCapabilities(n, w)
	caps[PodAnnotationsCapability] = true
	plugin["capabilities"] = caps
	data, err := json.MarshalIndent(map[string]any{
		"cniVersion": CNIVersion, "name": PlexusNetwork, "plugins": []any{plugin},
	}, "", "  ")
	harness.Must(n.t, err)
	return data
}

// defaultCapabilities are the capabilities the default network's plugins
// declare: the runtime sends runtimeConfig only for what the config it
// calls declares, and plexus hands them on.
func defaultCapabilities(n *Node, w *harness.World) map[string]bool {
	data, err := os.ReadFile(w.Plexus["clusterNetwork"].(string))
	harness.Must(n.t, err)
	var list struct {
		Plugins []struct {
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"plugins"`
	}
	harness.Must(n.t, json.Unmarshal(data, &list))
	caps := map[string]bool{}
	for _, p := range list.Plugins {
		for k, v := range p.Capabilities {
			if v {
				caps[k] = true
			}
		}
	}
	return caps
}
