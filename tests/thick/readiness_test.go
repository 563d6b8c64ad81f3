package thick

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// readinessDirs is kubelet's CNI config dir, empty at first.
func readinessDirs(t *testing.T, w *harness.World) (confDir string, ours string) {
	confDir = filepath.Join(w.Dir, "kubelet-net.d")
	harness.Must(t, os.MkdirAll(confDir, 0o755))
	return confDir, filepath.Join(confDir, "00-plexus.conflist")
}

// TestS6_1NoConfigUntilDefaultNetwork: plexusd installs plexus's CNI config
// only once the default network's exists, pointing at it, and removes it
// when it goes (and on uninstall).
func TestS6_1NoConfigUntilDefaultNetwork(t *testing.T) {
	w := harness.New(t)
	confDir, ours := readinessDirs(t, w)
	d := w.StartDaemon("--install-config", "--cni-conf-dir", confDir, "--default-conf-dir", confDir, "--uninstall")
	// Give the installer several passes: the config must still not exist.
	waitFor(t, func() bool { return strings.Count(d.Log(), "waiting for the cluster-wide default network") >= 2 })
	if _, err := os.Stat(ours); !os.IsNotExist(err) {
		t.Fatalf("plexus's config was written before the default network's: %v", err)
	}
	def := filepath.Join(confDir, "10-default.conflist")
	raw, err := os.ReadFile(filepath.Join(w.Dir, "default.conflist"))
	harness.Must(t, err)
	w.WriteFile(def, string(raw))
	waitFor(t, func() bool { _, err := os.Stat(ours); return err == nil })
	var conf struct {
		CNIVersion string           `json:"cniVersion"`
		Plugins    []map[string]any `json:"plugins"`
	}
	b, err := os.ReadFile(ours)
	harness.Must(t, err)
	harness.Must(t, json.Unmarshal(b, &conf))
	p := conf.Plugins[0]
	if p["type"] != "plexus-shim" || p["clusterNetwork"] != def || p["daemonSocket"] != d.Socket || conf.CNIVersion != "1.0.0" {
		t.Fatalf("installed config %s", b)
	}
	// The installed config works end to end: cnitool reads kubelet's dir.
	w.Plexus = nil
	w.NetConf = confDir
	w.Pod("demo", "web", "")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	w.Add(c)
	w.Del(c)
	w.AssertNoLeaks(before)

	harness.Must(t, os.Remove(def))
	waitFor(t, func() bool { _, err := os.Stat(ours); return os.IsNotExist(err) })
	w.WriteFile(def, string(raw))
	waitFor(t, func() bool { _, err := os.Stat(ours); return err == nil })
	d.Stop()
	if _, err := os.Stat(ours); !os.IsNotExist(err) {
		t.Error("--uninstall must remove plexus's config when plexusd stops")
	}
}

// TestS6_1_2BlockUntilDefaultNetwork: the alternative method installs at
// once and holds ADDs until the default network's config appears, failing
// after the deadline.
func TestS6_1_2BlockUntilDefaultNetwork(t *testing.T) {
	w := harness.New(t)
	confDir, ours := readinessDirs(t, w)
	w.StartDaemon("--install-config", "--cni-conf-dir", confDir, "--default-conf-dir", confDir, "--readiness", "block", "--block-deadline", "300ms")
	waitFor(t, func() bool { _, err := os.Stat(ours); return err == nil })
	w.Plexus = nil
	w.NetConf = confDir
	w.Pod("demo", "web", "")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	out, err := w.CNITool(c, "add")
	if err == nil || !strings.Contains(out, "s6.1.2") {
		t.Fatalf("ADD before the default network must wait and fail: %v %s", err, out)
	}
	w.AssertNoLeaks(before)
	raw, rerr := os.ReadFile(filepath.Join(w.Dir, "default.conflist"))
	harness.Must(t, rerr)
	w.WriteFile(filepath.Join(confDir, "10-default.conflist"), string(raw))
	w.Add(c)
	w.AssertInterfaces(c, 1, "1")
	w.Del(c)
	w.AssertNoLeaks(before)
}
