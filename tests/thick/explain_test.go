package thick

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/tests/harness"
)

// outcome is an ADD's: refused with code, or the sandbox's interfaces.
type outcome struct {
	code   uint
	ifaces []string
}

func attaches(ifaces ...string) outcome { return outcome{ifaces: ifaces} }
func refused(code uint) outcome         { return outcome{code: code} }

// explainConfigs are the plexus configs the pods are tried under: the
// defaults, and two that change every setting explain must take from
// the node (defaultNetworks needs Multus compatibility, strictSelection
// turns it off).
var explainConfigs = []struct {
	name string
	keys map[string]any
}{
	{"default", nil},
	{"strict", map[string]any{"strictSelection": true, "systemNamespace": "infra"}},
	{"defaultNetworks", map[string]any{"systemNamespace": "infra", "defaultNetworks": []string{"dn"}, "systemNamespaces": []string{"sys"}}},
}

// explainPods are the pods, each with the ADD it gets under each of
// explainConfigs, in order.
var explainPods = []struct {
	name, namespace, networks string
	podDefault                string // v1.multus-cni.io/default-network
	want                      [3]outcome
}{
	{name: "valid", networks: "net-a,net-a", want: [3]outcome{
		attaches("eth0", "net1", "net2"), attaches("eth0", "net1", "net2"), attaches("eth0", "net1", "net2", "net3")}},
	{name: "invalid", networks: `[{"name":"net-a","ips":"x"}]`, want: [3]outcome{
		attaches("eth0"), refused(codes.InvalidSelection), attaches("eth0", "net1")}},
	{name: "missing-nad", networks: "net-a,gone", want: [3]outcome{
		refused(codes.NetworkNotFound), refused(codes.NetworkNotFound), refused(codes.NetworkNotFound)}},
	{name: "other-namespace", networks: "net-a,other/net-b", want: [3]outcome{
		refused(codes.PolicyDenied), refused(codes.PolicyDenied), refused(codes.PolicyDenied)}},
	{name: "global-namespace", networks: "default/net-g", want: [3]outcome{
		attaches("eth0", "net1"), attaches("eth0", "net1"), attaches("eth0", "net1", "net2")}},
	{name: "extension-key", networks: `[{"name":"net-a","io.plexus.overrides":{"mtu":1280}}]`, want: [3]outcome{
		attaches("eth0", "net1"), attaches("eth0", "net1"), attaches("eth0", "net1", "net2")}},
	{name: "extension-refuses", networks: `[{"name":"net-a","io.plexus.overrides":{"bridge":"hijack0"}}]`, want: [3]outcome{
		refused(codes.Extension), refused(codes.Extension), refused(codes.Extension)}},
	{name: "unowned-key", networks: `[{"name":"net-a","org.example.color":"red"}]`, want: [3]outcome{
		attaches("eth0", "net1"), attaches("eth0", "net1"), attaches("eth0", "net1", "net2")}},
	{name: "multus-form", networks: "net-a@data0", want: [3]outcome{
		attaches("data0", "eth0"), refused(codes.InvalidSelection), attaches("data0", "eth0", "net1")}},
	{name: "pod-default", networks: "", podDefault: "alt", want: [3]outcome{
		refused(codes.PolicyDenied), attaches("eth0"), refused(codes.PolicyDenied)}},
	{name: "system-namespace", namespace: "sys", networks: "net-s", want: [3]outcome{
		attaches("eth0", "net1"), attaches("eth0", "net1"), attaches("eth0", "net1")}},
}

// TestExplainVerdictIsTheADDs: for each pod, plexusctl explain -f (the
// manifests, no cluster) says what the real ADD then does: refused with
// the same CNI error, naming the same network, or attached on the same
// interfaces; in thin mode (the plexus plugin) and thick mode (plexus-shim
// and plexusd), under the default config (explain assumes the defaults)
// and under others (explain reads the node's config, --config).
func TestExplainVerdictIsTheADDs(t *testing.T) {
	ctl := buildPlexusctl(t)
	overrides := exampleModule(t, "overrides")
	for _, mode := range []string{"thin", "thick"} {
		for ci, cfg := range explainConfigs {
			t.Run(mode+"/"+cfg.name, func(t *testing.T) {
				w := explainWorld(t, cfg.keys, overrides)
				if mode == "thick" {
					w.StartDaemon()
				}
				for _, p := range explainPods {
					t.Run(p.name, func(t *testing.T) {
						ns := p.namespace
						if ns == "" {
							ns = "demo"
						}
						podFile := explainPod(t, w, ns, p.name, p.networks, p.podDefault)
						var conf string
						if cfg.keys != nil {
							conf = filepath.Join(w.NetConf, "00-plexus.conf")
						}
						verdict := explainVerdict(t, ctl, w, podFile, conf)
						got := realADD(t, w, ns, p.name)
						if !reflect.DeepEqual(got.outcome, p.want[ci]) {
							t.Errorf("the ADD: %+v, want %+v (%s)", got.outcome, p.want[ci], got.msg)
						}
						compareVerdict(t, verdict, got)
					})
				}
			})
		}
	}
}

// explainWorld is a World with cfg's keys, the shipped baseline policy,
// the overrides extension (allowing "mtu") and the pods' NADs.
func explainWorld(t *testing.T, keys map[string]any, overrides string) *harness.World {
	w := harness.New(t)
	for k, v := range keys {
		w.Set(k, v)
	}
	// The longest deadline: on a busy host a decision must not become a
	// timeout, which is a denial explain cannot foresee.
	w.Set("policy", map[string]any{"paths": baselinePaths(t), "deadline": "10s"})
	w.Set("extensions", map[string]any{"modules": []any{map[string]any{"path": overrides, "config": map[string]any{"allow": []string{"mtu"}}}}})
	for _, n := range [][2]string{{"demo", "net-a"}, {"other", "net-b"}, {"default", "net-g"}, {"sys", "net-s"}, {"infra", "dn"}, {"infra", "alt"}, {"kube-system", "alt"}} {
		w.BridgeNAD(n[0], n[1])
	}
	return w
}

// explainPod writes the pod's manifest and returns its path.
func explainPod(t *testing.T, w *harness.World, ns, name, networks, podDefault string) string {
	w.Pod(ns, name, networks)
	path := filepath.Join(w.Manifests, "pod-"+ns+"-"+name+".yaml")
	if podDefault != "" {
		b, err := os.ReadFile(path)
		harness.Must(t, err)
		w.WriteFile(path, strings.Replace(string(b), "  annotations:\n", "  annotations:\n    v1.multus-cni.io/default-network: "+podDefault+"\n", 1))
	}
	return path
}

// added is what the real ADD did.
type added struct {
	outcome
	msg string
}

// realADD runs the pod's ADD as a runtime does, then undoes it, checking
// nothing is left either way.
func realADD(t *testing.T, w *harness.World, ns, name string) added {
	c := w.Container(ns, name)
	before := harness.HostVeths(t)
	_, e := w.Plugin(c, "ADD")
	if e != nil {
		w.AssertDetached(c, before)
		return added{outcome: refused(e.Code), msg: e.Msg}
	}
	got := added{outcome: attaches(harness.IfNames(c.Links(t))...)}
	w.DelDetached(c, before, "DEL")
	return got
}

// verdict is what plexusctl explain -o json says of the ADD.
type verdict struct {
	Settings struct {
		From string `json:"from"`
	} `json:"settings"`
	Add struct {
		Fails      bool     `json:"fails"`
		Code       uint     `json:"code"`
		Message    string   `json:"message"`
		Network    string   `json:"network"`
		Interfaces []string `json:"interfaces"`
	} `json:"add"`
	Problems []string `json:"problems"`
}

// explainVerdict runs plexusctl explain pod -f on the pod's manifest, the
// World's NADs, policy and extensions, and conf when given.
func explainVerdict(t *testing.T, ctl string, w *harness.World, podFile, conf string) verdict {
	t.Helper()
	plexusConf := filepath.Join(w.NetConf, "00-plexus.conf")
	args := []string{"explain", "pod", "-f", podFile, "--extensions", plexusConf, "-o", "json"}
	nads, err := filepath.Glob(filepath.Join(w.Manifests, "nad-*.yaml"))
	harness.Must(t, err)
	for _, n := range nads {
		args = append(args, "--nad", n)
	}
	for _, p := range baselinePaths(t) {
		args = append(args, "--policy", p)
	}
	if conf != "" {
		args = append(args, "--config", conf)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), ctl, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		t.Fatalf("plexusctl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var v verdict
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("plexusctl explain -o json: %v: %s", err, out.String())
	}
	if want := map[bool]string{true: "config ", false: "defaults"}[conf != ""]; !strings.HasPrefix(v.Settings.From, want) {
		t.Errorf("explain planned with the settings of %q, want %q", v.Settings.From, want)
	}
	return v
}

// compareVerdict: explain refused with the ADD's code, naming the network
// the ADD's error names, with the same message (but for a missing NAD,
// which explain looked for in other places), or attached the same
// interfaces.
func compareVerdict(t *testing.T, v verdict, got added) {
	t.Helper()
	a := v.Add
	if a.Fails != (got.code != 0) || a.Code != got.code {
		t.Fatalf("explain: fails %v with code %d (%s), the ADD: code %d (%s); problems %q", a.Fails, a.Code, a.Message, got.code, got.msg, v.Problems)
	}
	if got.code == 0 {
		if ifaces := slices.Sorted(slices.Values(a.Interfaces)); !reflect.DeepEqual(ifaces, got.ifaces) {
			t.Errorf("explain: interfaces %v, the ADD attached %v", ifaces, got.ifaces)
		}
		return
	}
	if a.Network != "" && !strings.Contains(got.msg, "network "+a.Network+": ") {
		t.Errorf("explain: fails on network %s, the ADD's error does not name it: %s", a.Network, got.msg)
	}
	if got.code != codes.NetworkNotFound && a.Message != got.msg {
		t.Errorf("explain's error:\n  %s\nthe ADD's:\n  %s", a.Message, got.msg)
	}
}

// baselinePaths are the policy the nodes enforce by default: the rule
// library and the shipped baseline (docs/security.md).
func baselinePaths(t *testing.T) []string {
	t.Helper()
	dir, err := filepath.Abs("../../policies")
	harness.Must(t, err)
	return []string{filepath.Join(dir, "library"), filepath.Join(dir, "baseline.yaml")}
}

// buildPlexusctl builds the command under test from this tree: the one
// in PLEXUS_BIN may predate it.
func buildPlexusctl(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plexusctl")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "./cmd/plexusctl")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building plexusctl: %v\n%s", err, b)
	}
	return out
}

// exampleModule is an example extension make build makes.
func exampleModule(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(os.Getenv("PLEXUS_BIN"), "extensions", name+".wasm")
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("PLEXUS_E2E") == "1" {
			t.Fatalf("extension module missing (make build makes it): %v", err)
		}
		t.Skip("extension modules not built; run make test")
	}
	return path
}
