package thick

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

func TestThickAddDelThroughShim(t *testing.T) {
	w := harness.New(t)
	d := w.StartDaemon()
	w.BridgeNAD("demo", "net-a")
	w.BridgeNAD("other", "net-b")
	w.Pod("demo", "web", "net-a,other/net-b,net-a")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	out := w.Add(c)
	if !strings.Contains(out, `"cniVersion": "1.0.0"`) || !strings.Contains(out, `"eth0"`) {
		t.Errorf("the runtime's result must be the default network's: %s", out)
	}
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0", "net1", "net2", "net3"}) {
		t.Fatalf("interfaces %v", got)
	}
	if st := w.Status("demo", "web"); len(st) != 4 || !st[0].Default {
		t.Errorf("status %+v", st)
	}
	w.Del(c)
	w.AssertNoLeaks(before)
	if n := d.Metric("plexus_requests_total", `command="ADD"`, `result="ok"`); n != 1 {
		t.Errorf("plexus_requests_total ADD ok = %v", n)
	}
	if n := d.Metric("plexus_attachments_total", `result="ok"`); n != 4 {
		t.Errorf("plexus_attachments_total = %v, want 4", n)
	}
}

// TestThickErrorsRelayedExactly: plexusd's CNI error reaches the runtime
// with its code and message.
func TestThickErrorsRelayedExactly(t *testing.T) {
	w := harness.New(t)
	w.StartDaemon()
	w.Pod("demo", "web", "missing-nad")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	_, e := w.Plugin(c, "ADD")
	if e == nil || e.Code != 101 || !strings.Contains(e.Msg, "demo/missing-nad") {
		t.Fatalf("want code 101 naming the NAD, got %+v", e)
	}
	w.AssertNoLeaks(before)
}

// TestThickDaemonKilledThenDel: a dead plexusd never leaks: the shim tears
// down from the attachment record itself.
func TestThickDaemonKilledThenDel(t *testing.T) {
	w := harness.New(t)
	d := w.StartDaemon()
	w.BridgeNAD("demo", "net-a")
	w.Pod("demo", "web", "net-a,net-a")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	w.Add(c)
	d.Kill()
	w.Del(c)
	w.AssertDetached(c, before)
	if w.StatusExists("demo", "web") {
		t.Error("the DEL without plexusd left the pod's status file")
	}
}

// TestThickDaemonKilledThenDelWithInstalledConfig: the same through the
// config plexusd installs for kubelet, which is all the shim's DEL has
// without plexusd: it still tears down from the record and removes the
// manifests source's status file (<manifests>/status/<ns>_<pod>.json).
func TestThickDaemonKilledThenDelWithInstalledConfig(t *testing.T) {
	w := harness.New(t)
	confDir, ours := readinessDirs(t, w)
	raw, err := os.ReadFile(filepath.Join(w.Dir, "default.conflist"))
	harness.Must(t, err)
	w.WriteFile(filepath.Join(confDir, "10-default.conflist"), string(raw))
	d := w.StartDaemon("--install-config", "--cni-conf-dir", confDir, "--default-conf-dir", confDir)
	waitFor(t, func() bool { _, err := os.Stat(ours); return err == nil })
	w.Plexus = nil
	w.NetConf = confDir
	w.BridgeNAD("demo", "net-a")
	w.Pod("demo", "web", "net-a")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	w.Add(c)
	if !w.StatusExists("demo", "web") {
		t.Fatal("ADD through plexusd wrote no status file")
	}
	d.Kill()
	w.Del(c)
	w.AssertDetached(c, before)
	if w.StatusExists("demo", "web") {
		t.Error("the shim's DEL without plexusd left the pod's status file")
	}
}

// TestThickAddWithoutDaemonFailsClearly: ADD waits daemonWait, then fails
// naming plexusd and the socket; nothing is attached.
func TestThickAddWithoutDaemonFailsClearly(t *testing.T) {
	w := harness.New(t)
	d := w.StartDaemon()
	w.Set("daemonWait", "500ms")
	d.Stop()
	w.Pod("demo", "web", "")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	w.AddRefused(c, before, 115, "plexusd", d.Socket)
}

// TestThickDaemonRestartMidRun: attachments made before a restart are
// removed by DELs served after it.
func TestThickDaemonRestartMidRun(t *testing.T) {
	w := harness.New(t)
	d := w.StartDaemon()
	w.BridgeNAD("demo", "net-a")
	w.Pod("demo", "one", "net-a")
	w.Pod("demo", "two", "net-a")
	one, two := w.Container("demo", "one"), w.Container("demo", "two")
	before := harness.HostVeths(t)
	w.Add(one)
	d.Stop()
	d.Start()
	w.Add(two)
	w.Del(one)
	w.Del(two)
	w.AssertNoLeaks(before)
}

// TestThickPolicyReload: a policy change applies without a restart; a
// broken change keeps the previous policy and says so.
func TestThickPolicyReload(t *testing.T) {
	w := harness.New(t)
	lib, err := filepath.Abs("../../policies/library")
	harness.Must(t, err)
	data := filepath.Join(w.Dir, "policy", "admin.yaml")
	harness.Must(t, os.MkdirAll(filepath.Dir(data), 0o755))
	w.WriteFile(data, "plexus:\n  config:\n    max_attachments: {enabled: true, max: 0}\n")
	w.Set("policy", map[string]any{"paths": []string{lib, filepath.Dir(data)}})
	d := w.StartDaemon("--policy-poll", "50ms")
	w.BridgeNAD("demo", "net-a")
	w.Pod("demo", "web", "net-a")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	if _, e := w.Plugin(c, "ADD"); e == nil || e.Code != 102 || !strings.Contains(e.Msg, "max-attachments") {
		t.Fatalf("want a max-attachments denial, got %+v", e)
	}
	reloads := d.Metric("plexus_policy_reloads_total", `result="ok"`)
	w.WriteFile(data, "plexus:\n  config:\n    max_attachments: {enabled: true, max: 4}\n")
	waitFor(t, func() bool { return d.Metric("plexus_policy_reloads_total", `result="ok"`) > reloads })
	w.MustPlugin(c, "ADD", "after raising the cap")
	w.Plugin(c, "DEL")

	// A policy that does not compile is refused; the last good one stays.
	// (The broken module is in a package the decision reads: plexus does
	// not parse modules the decision cannot reach.)
	broken := filepath.Join(filepath.Dir(data), "broken.rego")
	w.WriteFile(broken, "package plexus.rules.max_attachments\n\ndeny contains x if {\n")
	waitFor(t, func() bool { return d.Metric("plexus_policy_reloads_total", `result="failed"`) >= 1 })
	if d.Metric("plexus_policy_last_reload_ok") != 0 {
		t.Error("plexus_policy_last_reload_ok must report the rejected change")
	}
	if !strings.Contains(d.Log(), "previous policy stays in force") {
		t.Errorf("the log must say the change was rejected:\n%s", d.Log())
	}
	w.MustPlugin(c, "ADD", "the last good policy must stay in force")
	w.Plugin(c, "DEL")
	w.AssertNoLeaks(before)
	if n := d.Metric("plexus_policy_denials_total", `code="max-attachments"`); n != 1 {
		t.Errorf("denials by code = %v", n)
	}
}

// TestThickFiftyPodsConcurrently: 50 pods ADDed and DELed at once through
// the shim; nothing leaks.
func TestThickFiftyPodsConcurrently(t *testing.T) {
	w := harness.New(t)
	w.StartDaemon("--max-parallel", "8")
	w.BridgeNAD("demo", "net-a")
	cs := w.Pods("demo", 50, "net-a")
	before := harness.HostVeths(t)
	w.AddAll(cs)
	for _, c := range cs {
		w.AssertInterfaces(c, 2, "2")
	}
	w.DelAll(cs)
	w.AssertNoLeaks(before)
}
