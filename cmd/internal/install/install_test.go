package install

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	plexusfake "github.com/plexus-cni/plexus/core/api/client/clientset/versioned/fake"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
)

// node is a fake node's filesystem in temp dirs (the installer's whole
// world is files), with the ServiceAccount files a pod would have.
type node struct {
	t                                     *testing.T
	src, bin, conf, kubeconfig, token, ca string
}

func newNode(t *testing.T) *node {
	t.Helper()
	root := t.TempDir()
	n := &node{
		t: t, src: filepath.Join(root, "image/bin"), bin: filepath.Join(root, "opt/cni/bin"),
		conf: filepath.Join(root, "etc/cni/net.d"), token: filepath.Join(root, "sa/token"), ca: filepath.Join(root, "sa/ca.crt"),
	}
	n.kubeconfig = filepath.Join(n.conf, "plexus.d/plexus.kubeconfig")
	for _, d := range []string{n.src, n.bin, n.conf, filepath.Dir(n.token)} {
		must(t, os.MkdirAll(d, 0o755))
	}
	n.write(filepath.Join(n.src, "plexus"), "#!plexus v2")
	n.write(n.token, "token-1\n")
	n.write(n.ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	return n
}

func (n *node) options() Options {
	return Options{
		SrcBinDir: n.src, Binaries: []string{"plexus"}, BinDir: n.bin,
		DefaultConfDir: n.conf, ConfDir: n.conf, ConfName: DefaultConfName,
		Kubeconfig: n.kubeconfig, TokenFile: n.token, CAFile: n.ca,
		Server: "https://10.96.0.1:443", Extra: map[string]any{"logLevel": "debug"},
		Poll: 5 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
	}
}

func (n *node) installer() *Installer {
	n.t.Helper()
	in, err := New(n.options())
	must(n.t, err)
	return in
}

func (n *node) write(path, content string) {
	n.t.Helper()
	must(n.t, os.WriteFile(path, []byte(content), 0o644))
}

func (n *node) ours() string { return filepath.Join(n.conf, DefaultConfName) }

func (n *node) writeDefault(name string) string {
	p := filepath.Join(n.conf, name)
	n.write(p, `{"cniVersion":"0.4.0","name":"k8s-pod-network","plugins":[{"type":"bridge","bridge":"cni0"},{"type":"portmap","capabilities":{"portMappings":true}}]}`)
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// pluginConfig reads plexus's generated config and checks that plexus
// itself accepts its plugin entry.
func (n *node) pluginConfig() (list map[string]any, plugin *config.Config) {
	n.t.Helper()
	raw, err := os.ReadFile(n.ours())
	must(n.t, err)
	var l struct {
		CNIVersion string            `json:"cniVersion"`
		Name       string            `json:"name"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	must(n.t, json.Unmarshal(raw, &l))
	must(n.t, json.Unmarshal(raw, &list))
	if len(l.Plugins) != 1 {
		n.t.Fatalf("plugins: %s", raw)
	}
	c, err := config.Parse(l.Plugins[0])
	if err != nil {
		n.t.Fatalf("plexus rejects the generated config: %v\n%s", err, raw)
	}
	return list, c
}

func TestNoConfigBeforeTheDefaultNetwork(t *testing.T) {
	n := newNode(t)
	in := n.installer()
	must(t, in.InstallBinaries())
	must(t, in.Reconcile(t.Context()))
	if exists(n.ours()) {
		t.Fatal("plexus's config written before the default network's exists (s6.1)")
	}
	if !exists(n.kubeconfig) || !exists(filepath.Join(n.bin, "plexus")) {
		t.Error("the kubeconfig and the binary are installed right away")
	}
	// A config that is plexus's own (type plexus, any name) is not the
	// default network, nor is a file kubelet would not load.
	n.write(filepath.Join(n.conf, "05-old-plexus.conf"), `{"cniVersion":"1.0.0","name":"x","type":"plexus","clusterNetwork":"y"}`)
	n.write(filepath.Join(n.conf, "README"), "not a config")
	n.write(filepath.Join(n.conf, "10-half.conflist"), `{"cniVersion":`)
	must(t, in.Reconcile(t.Context()))
	if exists(n.ours()) {
		t.Fatal("plexus's config written with only plexus configs and junk in the directory")
	}

	def := n.writeDefault("10-calico.conflist")
	must(t, in.Reconcile(t.Context()))
	list, c := n.pluginConfig()
	if c.ClusterNetwork != def || c.Kubeconfig != n.kubeconfig || c.LogLevel != "debug" || c.Type != "plexus" {
		t.Errorf("plexus config clusterNetwork=%q kubeconfig=%q logLevel=%q type=%q", c.ClusterNetwork, c.Kubeconfig, c.LogLevel, c.Type)
	}
	if list["cniVersion"] != "0.4.0" || list["name"] != "plexus" {
		t.Errorf("conflist cniVersion %v name %v, want the default network's version and plexus", list["cniVersion"], list["name"])
	}
	if !c.Capabilities["portMappings"] || !c.Capabilities[pipeline.PodAnnotationsCapability] || len(c.Capabilities) != 2 {
		t.Errorf("capabilities %v, want the default network's portMappings and the pod annotations", c.Capabilities)
	}
}

// TestConfigCNIVersion: the runtime checks plexus's result against the
// conflist's cniVersion, so the installer writes one the runtime accepts:
// the default network's (the runtime already uses it) up to 1.0.0, which
// containerd 1.6 accepts, or the one it is told.
func TestConfigCNIVersion(t *testing.T) {
	for _, tc := range []struct {
		name, defaultVersion, flag, want string
	}{
		{name: "default network's 0.4.0", defaultVersion: "0.4.0", want: "0.4.0"},
		{name: "default network's 1.0.0", defaultVersion: "1.0.0", want: "1.0.0"},
		{name: "default network's 1.1.0 capped", defaultVersion: "1.1.0", want: "1.0.0"},
		{name: "default network without one", defaultVersion: "", want: "1.0.0"},
		{name: "default network's unsupported 0.2.0", defaultVersion: "0.2.0", want: "1.0.0"},
		{name: "told 1.1.0", defaultVersion: "1.0.0", flag: "1.1.0", want: "1.1.0"},
		{name: "told 0.3.1", defaultVersion: "1.1.0", flag: "0.3.1", want: "0.3.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			o := n.options()
			o.CNIVersion = tc.flag
			in, err := New(o)
			must(t, err)
			n.write(filepath.Join(n.conf, "10-default.conflist"), `{"cniVersion":"`+tc.defaultVersion+`","name":"d","plugins":[{"type":"bridge"}]}`)
			must(t, in.Reconcile(t.Context()))
			if list, _ := n.pluginConfig(); list["cniVersion"] != tc.want {
				t.Errorf("cniVersion %v, want %s", list["cniVersion"], tc.want)
			}
		})
	}
}

func TestConfigFollowsTheDefaultNetwork(t *testing.T) {
	n := newNode(t)
	in := n.installer()
	def := n.writeDefault("10-flannel.conflist")
	must(t, in.Reconcile(t.Context()))
	if _, c := n.pluginConfig(); c.ClusterNetwork != def {
		t.Fatalf("clusterNetwork %q, want %q", c.ClusterNetwork, def)
	}
	// The default network replaced its config with another name.
	must(t, os.Remove(def))
	def2 := n.writeDefault("20-flannel.conflist")
	must(t, in.Reconcile(t.Context()))
	if _, c := n.pluginConfig(); c.ClusterNetwork != def2 {
		t.Errorf("clusterNetwork %q after the default network's config moved, want %q", c.ClusterNetwork, def2)
	}
	// Gone altogether: plexus must not look ready any more (s6.1).
	must(t, os.Remove(def2))
	must(t, in.Reconcile(t.Context()))
	if exists(n.ours()) {
		t.Error("plexus's config kept after the default network's config disappeared")
	}
}

func TestConfigMustSortFirst(t *testing.T) {
	n := newNode(t)
	n.writeDefault("00-aaa.conf")
	err := n.installer().Reconcile(t.Context())
	if err == nil || !strings.Contains(err.Error(), "00-aaa.conf sorts before 00-plexus.conflist") {
		t.Fatalf("err = %v, want a refusal naming both files", err)
	}
	if exists(n.ours()) {
		t.Error("wrote a config kubelet would not use")
	}
}

func TestSeparateKubeletConfDir(t *testing.T) {
	n := newNode(t)
	o := n.options()
	o.ConfDir = filepath.Join(t.TempDir(), "plexus-net.d") // s6.1.1
	in, err := New(o)
	must(t, err)
	must(t, in.Reconcile(t.Context()))
	ours := filepath.Join(o.ConfDir, DefaultConfName)
	if exists(ours) {
		t.Fatal("config written before the default network's")
	}
	def := n.writeDefault("00-aaa.conf") // sorting is irrelevant in a directory of its own
	must(t, in.Reconcile(t.Context()))
	raw, err := os.ReadFile(ours)
	must(t, err)
	if !strings.Contains(string(raw), def) {
		t.Errorf("config %s does not point at %s", raw, def)
	}
}

func TestKubeconfigFollowsTheToken(t *testing.T) {
	n := newNode(t)
	in := n.installer()
	must(t, in.Reconcile(t.Context()))
	check := func(want string) {
		t.Helper()
		kc, err := clientcmd.LoadFromFile(n.kubeconfig)
		must(t, err)
		ai, cl := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo], kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster]
		if ai.Token != want || cl.Server != "https://10.96.0.1:443" || !bytes.Contains(cl.CertificateAuthorityData, []byte("MIIB")) {
			t.Errorf("kubeconfig token %q server %q, want %q and the CA", ai.Token, cl.Server, want)
		}
		fi, err := os.Stat(n.kubeconfig)
		must(t, err)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("kubeconfig mode %v, want 0600 (it holds a credential)", fi.Mode().Perm())
		}
	}
	check("token-1")
	// kubelet rotates projected tokens by swapping a symlinked directory;
	// for the installer it is a new content at the same path.
	n.write(n.token, "token-2\n")
	must(t, in.Reconcile(t.Context()))
	check("token-2")
}

func TestBinariesReplacedAtomically(t *testing.T) {
	n := newNode(t)
	n.write(filepath.Join(n.bin, "plexus"), "#!plexus v1")
	in := n.installer()
	must(t, in.InstallBinaries())
	got, err := os.ReadFile(filepath.Join(n.bin, "plexus"))
	must(t, err)
	fi, err := os.Stat(filepath.Join(n.bin, "plexus"))
	must(t, err)
	if string(got) != "#!plexus v2" || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed binary %q mode %v, want the image's, executable", got, fi.Mode().Perm())
	}
	entries, err := os.ReadDir(n.bin)
	must(t, err)
	if len(entries) != 1 {
		t.Errorf("bin dir has %d entries, want 1 (no temporary files left)", len(entries))
	}
	o := n.options()
	o.Binaries = []string{"../evil"}
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "../evil") {
		t.Errorf("a binary name with a path: err %v, want a refusal naming it", err)
	}
}

// TestRunInstallsThenUninstalls drives Run as the DaemonSet does: it waits
// for the default network, installs, follows a token rotation, and on
// shutdown with uninstall removes exactly what it installed.
func TestRunInstallsThenUninstalls(t *testing.T) {
	n := newNode(t)
	o := n.options()
	o.Uninstall = true
	in, err := New(o)
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()

	waitFor(t, "the kubeconfig", func() bool { return exists(n.kubeconfig) })
	// A token change seen means at least one whole pass came before it.
	n.write(n.token, "token-2")
	waitFor(t, "token-2 in the kubeconfig", func() bool {
		b, _ := os.ReadFile(n.kubeconfig)
		return strings.Contains(string(b), "token-2")
	})
	if exists(n.ours()) {
		t.Fatal("Run wrote plexus's config before the default network's exists (s6.1)")
	}
	def := n.writeDefault("10-bridge.conflist")
	waitFor(t, "plexus's config", func() bool { return exists(n.ours()) })
	n.write(n.token, "token-rotated")
	waitFor(t, "the rotated token in the kubeconfig", func() bool {
		b, _ := os.ReadFile(n.kubeconfig)
		return strings.Contains(string(b), "token-rotated")
	})
	cancel() // SIGTERM
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, p := range []string{n.ours(), n.kubeconfig, filepath.Dir(n.kubeconfig), filepath.Join(n.bin, "plexus")} {
		if exists(p) {
			t.Errorf("%s left after uninstall", p)
		}
	}
	if !exists(def) {
		t.Error("uninstall removed the default network's config")
	}
}

func TestRunWithoutUninstallKeepsEverything(t *testing.T) {
	n := newNode(t)
	n.writeDefault("10-bridge.conflist")
	in := n.installer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	waitFor(t, "plexus's config", func() bool { return exists(n.ours()) })
	cancel() // an upgrade's SIGTERM: the next pod takes over
	must(t, <-done)
	for _, p := range []string{n.ours(), n.kubeconfig, filepath.Join(n.bin, "plexus")} {
		if !exists(p) {
			t.Errorf("%s removed without uninstall", p)
		}
	}
}

// waitFor polls cond; the bound is for something that must happen, not a
// measurement.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParseArgs(t *testing.T) {
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443", "PLEXUS_UNINSTALL": "true"}
	o, err := ParseArgs([]string{"--binaries", "plexus, plexusd", "--config", `{"logLevel":"info"}`, "--cni-version", "0.4.0", "--policy-dir", "/etc/cni/net.d/plexus.d/policy", "--extensions-dir", "/etc/cni/net.d/plexus.d/extensions"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	must(t, err)
	if o.Server != "https://[fd00::1]:443" || !o.Uninstall || o.ConfDir != DefaultConfDir || len(o.Binaries) != 2 || o.Extra["logLevel"] != "info" || o.CNIVersion != "0.4.0" ||
		o.PolicyDir != "/etc/cni/net.d/plexus.d/policy" || o.PolicySrcDir != DefaultPolicySrc ||
		o.ExtensionsDir != "/etc/cni/net.d/plexus.d/extensions" || o.ExtensionsSrcDir != DefaultExtensionsSrc {
		t.Errorf("options %+v", o)
	}
	// The node the plugin's token is bound to comes from the downward
	// API's NODE_NAME unless --node-name says otherwise.
	env["NODE_NAME"] = "node-a"
	o, err = ParseArgs([]string{"--token-ttl", "30m"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	must(t, err)
	if o.NodeName != "node-a" || o.TokenTTL != 30*time.Minute {
		t.Errorf("node name %q, token TTL %s; want node-a, 30m", o.NodeName, o.TokenTTL)
	}
	o, err = ParseArgs([]string{"--node-name", "node-b"}, func(k string) string { return env[k] }, &bytes.Buffer{})
	must(t, err)
	if o.NodeName != "node-b" || o.TokenTTL != DefaultTokenTTL {
		t.Errorf("node name %q, token TTL %s; want node-b, %s", o.NodeName, o.TokenTTL, DefaultTokenTTL)
	}
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{}, "KUBERNETES_SERVICE_HOST"},
		{[]string{"--server", "https://x", "--config", "[]"}, nil, "--config"},
		{[]string{"--server", "https://x", "stray"}, nil, `unexpected argument "stray"`},
		{[]string{"--server", "https://x"}, map[string]string{"PLEXUS_UNINSTALL": "maybe"}, "PLEXUS_UNINSTALL"},
	} {
		_, err := ParseArgs(tt.args, func(k string) string { return tt.env[k] }, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseArgs(%v) = %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	n := newNode(t)
	for _, tt := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.ConfName = "plexus.conf" }, "config name"},
		{func(o *Options) { o.ConfName = "../00-plexus.conflist" }, "config name"},
		{func(o *Options) { o.BinDir = "opt/cni/bin" }, "absolute"},
		{func(o *Options) { o.Server = "http://10.96.0.1" }, "https://"},
		{func(o *Options) { o.Extra = map[string]any{"clusterNetwork": "x"} }, `"clusterNetwork" is set by the installer`},
		{func(o *Options) { o.CNIVersion = "2.0.0" }, `cniVersion "2.0.0": plexus supports 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0`},
		{func(o *Options) { o.CNIVersion = "1.0" }, `cniVersion "1.0": plexus supports`},
		{func(o *Options) { o.Manifests = "/etc/plexus/manifests" }, "only for a config-only install"},
		{func(o *Options) { o.TokenTTL = 5 * time.Minute }, "token TTL 5m0s: TokenRequest accepts no less than 10m0s"},
		{func(o *Options) { o.TokenTTL = 48 * time.Hour }, "token TTL 48h0m0s: deploy/base/admission.yaml (plexus-tokens) refuses more than 24h0m0s"},
	} {
		o := n.options()
		tt.edit(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New = %v, want %q", err, tt.want)
		}
	}
}

func TestBinariesOnlyCopiesAndReturns(t *testing.T) {
	src, dst, conf := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "plexus"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := New(Options{BinariesOnly: true, SrcBinDir: src, Binaries: []string{"plexus"}, BinDir: dst,
		ConfDir: conf, DefaultConfDir: conf, ConfName: DefaultConfName})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "plexus")); err != nil {
		t.Fatalf("binary not installed: %v", err)
	}
	if entries, _ := os.ReadDir(conf); len(entries) != 0 {
		t.Errorf("--binaries-only wrote %v into the CNI config dir", entries)
	}
}

func TestConfigOnlyImmediateWritesBeforeTheDefaultNetwork(t *testing.T) {
	conf := t.TempDir()
	in, err := New(Options{ConfigOnly: true, Immediate: true, ConfDir: conf, DefaultConfDir: conf, ConfName: DefaultConfName,
		Extra: map[string]any{"daemonSocket": "/run/plexus/plexusd.sock"}, Manifests: "/etc/plexus/manifests"})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(conf, DefaultConfName))
	if err != nil {
		t.Fatalf("s6.1.2 writes the config at once: %v", err)
	}
	for _, want := range []string{`"clusterNetwork": "` + conf + `"`, `"daemonSocket": "/run/plexus/plexusd.sock"`, `"manifests": "/etc/plexus/manifests"`, `"cniVersion": "1.0.0"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config lacks %s:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "kubeconfig") {
		t.Errorf("a config-only install must not name a kubeconfig:\n%s", b)
	}
}

// TestConfigOnlyUninstallRemovesTheNamedBinaries: plexusd (config-only)
// copies no binary, but its uninstall removes the ones thick mode's init
// container installed, and nothing else in the bin dir; a name that is
// not a plain file name is refused before anything runs.
func TestConfigOnlyUninstallRemovesTheNamedBinaries(t *testing.T) {
	n := newNode(t)
	def := n.writeDefault("10-bridge.conflist")
	for _, b := range []string{"plexus", "plexus-shim", "bridge"} {
		n.write(filepath.Join(n.bin, b), "#!"+b)
	}
	o := Options{ConfigOnly: true, ConfDir: n.conf, DefaultConfDir: n.conf, ConfName: DefaultConfName,
		Binaries: []string{"plexus", "plexus-shim"}, BinDir: n.bin, Uninstall: true, Log: slog.New(slog.DiscardHandler)}
	in, err := New(o)
	must(t, err)
	must(t, in.Reconcile(t.Context()))
	if !exists(n.ours()) {
		t.Fatal("no config installed")
	}
	if got, _ := os.ReadFile(filepath.Join(n.bin, "plexus")); string(got) != "#!plexus" {
		t.Errorf("a config-only install rewrote a binary: %q", got)
	}
	must(t, in.Uninstall())
	for _, p := range []string{n.ours(), filepath.Join(n.bin, "plexus"), filepath.Join(n.bin, "plexus-shim")} {
		if exists(p) {
			t.Errorf("%s left after uninstall", p)
		}
	}
	for _, p := range []string{def, filepath.Join(n.bin, "bridge")} {
		if !exists(p) {
			t.Errorf("uninstall removed %s, which plexus did not install", p)
		}
	}
	for _, bad := range []string{"../bridge", "sub/plexus", "..", ""} {
		o.Binaries = []string{bad}
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "binary") {
			t.Errorf("binary %q: err %v, want a refusal naming it", bad, err)
		}
	}
}

// A config with a policy or extensions names plexus, which runs the
// stages itself.
func TestConfigTypeIsPlexusWithPolicyOrExtensions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		extra    map[string]any
		binaries []string
		want     string
	}{
		{"no policy", map[string]any{"logLevel": "info"}, []string{"plexus"}, "plexus"},
		{"policy", map[string]any{"policy": map[string]any{"paths": []string{"/p"}}}, []string{"plexus"}, "plexus"},
		{"extensions", map[string]any{"extensions": map[string]any{}}, []string{"plexus"}, "plexus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			o := n.options()
			o.Extra, o.Binaries = tc.extra, nil
			for _, b := range tc.binaries {
				n.write(filepath.Join(n.src, b), "#!"+b)
				o.Binaries = append(o.Binaries, b)
			}
			in, err := New(o)
			must(t, err)
			n.writeDefault("10-flannel.conflist")
			must(t, in.Reconcile(t.Context()))
			list, _ := n.pluginConfig()
			if got := list["plugins"].([]any)[0].(map[string]any)["type"]; got != tc.want {
				t.Errorf("type %v, want %s", got, tc.want)
			}
		})
	}
}

// Following a policy object, the plugin's config names the library copy
// and the active revision's link, keeping --config's query.
func TestPolicyObjectNamesLibraryAndActiveRevision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extra   map[string]any
		wantErr string
	}{
		{name: "query kept", extra: map[string]any{"policy": map[string]any{"query": "data.x.decision"}}},
		{name: "no policy key"},
		{name: "paths given too", extra: map[string]any{"policy": map[string]any{"paths": []any{"/x"}}}, wantErr: `may not set "paths"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{
				SrcBinDir: "/opt/plexus/bin", BinDir: "/opt/cni/bin", ConfDir: "/etc/cni/net.d", DefaultConfDir: "/etc/cni/net.d",
				ConfName: DefaultConfName, Kubeconfig: DefaultKubeconfig, TokenFile: DefaultTokenFile, CAFile: DefaultCAFile,
				Server: "https://10.0.0.1:443", PolicySrcDir: DefaultPolicySrc, PolicyDir: "/etc/cni/net.d/plexus.d/policy",
				PolicyObject: "cluster", NodeName: "node-1", Plexus: plexusfake.NewClientset(),
				Extra: tc.extra,
			}
			in, err := New(o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			policy := in.o.Extra["policy"].(map[string]any)
			want := []string{"/etc/cni/net.d/plexus.d/policy/library", "/etc/cni/net.d/plexus.d/policy/active"}
			if got := policy["paths"].([]string); !slices.Equal(got, want) {
				t.Errorf("paths %q, want %q", got, want)
			}
			if tc.extra != nil && policy["query"] != "data.x.decision" {
				t.Errorf("query %v, want the one --config gave", policy["query"])
			}
			if !slices.Equal(in.o.PolicyDefaults, []string{"/etc/cni/net.d/plexus.d/policy/baseline.yaml"}) {
				t.Errorf("defaults %q, want the policy dir's baseline", in.o.PolicyDefaults)
			}
		})
	}
}
