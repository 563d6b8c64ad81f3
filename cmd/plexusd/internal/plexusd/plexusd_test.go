package plexusd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/plexus-cni/plexus/cmd/internal/cniplugin"
	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/manifests"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/policies"
)

func TestDigestChangesWithContentNotWithHiddenFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.rego", "package a")
	d1, err := digestPaths([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	write(".hidden", "ignored like the loader ignores it")
	if d2, _ := digestPaths([]string{dir}); d2 != d1 {
		t.Error("a hidden file changed the digest")
	}
	write("a.rego", "package a\n")
	if d3, _ := digestPaths([]string{"data.x:" + dir}); d3 == d1 {
		t.Error("a content change (through a data prefix) did not change the digest")
	}
	if _, err := digestPaths([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing path must be an error")
	}
}

func TestMetricsCountResultsByCode(t *testing.T) {
	m := newMetrics()
	h := m.handler(func(_ context.Context, c *daemon.Call) *daemon.Reply {
		if c.Env["CNI_COMMAND"] == "DEL" {
			return &daemon.Reply{Failed: true, Stdout: []byte(`{"code":109,"msg":"x"}`)}
		}
		return &daemon.Reply{}
	})
	h(context.Background(), &daemon.Call{Env: map[string]string{"CNI_COMMAND": "ADD"}})
	h(context.Background(), &daemon.Call{Env: map[string]string{"CNI_COMMAND": "DEL"}})
	if n := testutil.ToFloat64(m.requests.WithLabelValues("ADD", "ok")); n != 1 {
		t.Errorf("ADD ok = %v", n)
	}
	if n := testutil.ToFloat64(m.requests.WithLabelValues("DEL", "109")); n != 1 {
		t.Errorf("DEL 109 = %v", n)
	}
}

// The policy stage times every decision and counts a denial by the code
// of its first reason.
func TestDenialsCountedByReasonCode(t *testing.T) {
	ctx := context.Background()
	baseline := filepath.Join(t.TempDir(), "baseline.yaml")
	// The sample asks for a NAD in its own namespace; this denies it.
	if err := os.WriteFile(baseline, []byte("plexus:\n  config:\n    nad_allowlist:\n      enabled: true\n      require_allowlist: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.Abs("../../../../policies/library")
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	rp, err := newReloadingPolicy(ctx, policies.Config{Paths: []string{lib, baseline}}, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d, err := rp.Authorize(ctx, policies.SampleRequest())
	if err != nil || d.Allowed || len(d.Reasons) == 0 {
		t.Fatalf("decision = %+v, %v; want a denial with a reason", d, err)
	}
	if n := testutil.ToFloat64(m.denials.WithLabelValues(d.Reasons[0].Code)); n != 1 {
		t.Errorf("denials{code=%s} = %v", d.Reasons[0].Code, n)
	}
	if n := decisionCount(t, m); n != 1 {
		t.Errorf("decisions timed = %d, want 1", n)
	}
}

func decisionCount(t *testing.T, m *metrics) uint64 {
	t.Helper()
	var out dto.Metric
	if err := m.decisions.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}

func TestDefaultPresentIgnoresPlexusOwnConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "00-plexus.conflist"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if defaultPresent(dir, "00-plexus.conflist") {
		t.Error("plexus's own config is not the default network")
	}
	if err := os.WriteFile(filepath.Join(dir, "10-calico.conflist"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !defaultPresent(dir, "00-plexus.conflist") {
		t.Error("the default network's config was not seen")
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "plexusd.json")
	if err := os.WriteFile(cfg, []byte(`{"cacheDir":"/x","surprise":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := start(context.Background(), Options{ConfigFile: cfg})
	if err == nil || !strings.Contains(err.Error(), `"surprise"`) || !strings.Contains(err.Error(), cfg) {
		t.Fatalf("err = %v", err)
	}
}

// The installed config carries what plexusd's config says for the shim:
// its socket and daemonWait, and how selections are read (strictSelection,
// compat), read back as the plugin reads them.
func TestInstalledConfigCarriesDaemonKeys(t *testing.T) {
	for _, tt := range []struct {
		plexusd string
		want    time.Duration
		compat  bool
	}{
		{`{"daemonWait":"3s","logLevel":"debug"}`, 3 * time.Second, true},
		{`{}`, config.DefaultDaemonWait, true},
		// How selections are read reaches the calls (they carry this config).
		{`{"compat":"off"}`, config.DefaultDaemonWait, false},
		{`{"strictSelection":true}`, config.DefaultDaemonWait, false},
	} {
		conf, err := config.ParseBase([]byte(tt.plexusd))
		if err != nil {
			t.Fatal(err)
		}
		got, installed := installedConfig(t, conf)
		if got.DaemonSocket != "/run/p/plexusd.sock" || got.Daemon().Wait() != tt.want || got.Type != "plexus-shim" || got.MultusCompat() != tt.compat {
			t.Errorf("%s: installed %s", tt.plexusd, installed)
		}
	}
}

// TestIgnoredKeysCountedByBoundedKey: known keys are their own label;
// anything a pod may invent collapses into two labels.
func TestIgnoredKeysCountedByBoundedKey(t *testing.T) {
	m := newMetrics()
	for _, k := range []string{"default-route", "portMappings", "portMappings", "cni-args", "color", "shape", "com.example.vlan"} {
		m.ignored(k)
	}
	for label, want := range map[string]float64{"default-route": 1, "portMappings": 2, "cni-args": 1, "other": 2, "reverse-domain": 1, "color": 0} {
		if n := testutil.ToFloat64(m.ignoredKeys.WithLabelValues(label)); n != want {
			t.Errorf("ignored{key=%q} = %v, want %v", label, n, want)
		}
	}
}

// Calls carry the installed config, so the keys from Multus that shape a
// call must be in it.
func TestInstalledConfigCarriesCompatKeys(t *testing.T) {
	conf, err := config.ParseBase([]byte(`{"defaultNetworks":["sidecar"],"systemNamespaces":["infra"],
	  "readinessindicatorfile":"/etc/cni/net.d/10-calico.conflist","readinessTimeout":"20s",
	  "auxiliaryCNIChainName":"extras","logFile":"/var/log/plexus.log","logOptions":{"maxSize":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, installed := installedConfig(t, conf)
	if len(got.DefaultNetworks) != 1 || !got.IsSystemNamespace("infra") || got.ReadinessWait() != 20*time.Second ||
		got.ReadinessIndicatorFile == "" || got.AuxiliaryCNIChainName != "extras" || got.LogOptions == nil || got.LogOptions.MaxSize != 5 {
		t.Errorf("installed %s", installed)
	}
}

// TestInstalledConfigCarriesEveryCallSetting: whatever plexusd's config
// sets among the keys that shape a call, the shim's config says the same.
func TestInstalledConfigCarriesEveryCallSetting(t *testing.T) {
	conf, err := config.ParseBase([]byte(`{"cacheDir":"/var/lib/cni/px","confDir":"/etc/px","binDir":"/opt/px",
	  "logLevel":"debug","logFile":"/var/log/px.log","logOptions":{"maxSize":5},"strictSelection":true,"compat":"multus",
	  "defaultNetworks":["sidecar"],"systemNamespaces":["infra"],"readinessindicatorfile":"/run/ready","readinessTimeout":"20s",
	  "auxiliaryCNIChainName":"extras","daemonWait":"3s"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, installed := installedConfig(t, conf)
	if !reflect.DeepEqual(got.CallSettings, conf.CallSettings) {
		t.Errorf("installed %s\ncarries %+v\nwant %+v", installed, got.CallSettings, conf.CallSettings)
	}
	if got.DaemonSocket != "/run/p/plexusd.sock" {
		t.Errorf("installed daemonSocket %q", got.DaemonSocket)
	}
}

// installedConfig is the shim config plexusd installs for conf, parsed as
// a call would parse it, and as written.
func installedConfig(t *testing.T, conf *config.Config) (*config.Config, []byte) {
	t.Helper()
	dir := t.TempDir()
	d := &Daemon{conf: conf, o: Options{Socket: "/run/p/plexusd.sock", ConfDir: dir, DefaultConfDir: dir, ConfName: "00-plexus.conflist", Readiness: ReadinessBlock}}
	in, err := d.installer()
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "00-plexus.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Plugins []json.RawMessage }
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Plugins) != 1 {
		t.Fatalf("%s: %v", raw, err)
	}
	got, err := config.Parse(list.Plugins[0])
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return got, list.Plugins[0]
}

type fakeDropper uint64

func (f fakeDropper) DroppedWarnings() uint64 { return uint64(f) }

// TestDroppedWarningsExported: the extension host's count of warnings past
// a call's cap is a metric.
func TestDroppedWarningsExported(t *testing.T) {
	m := newMetrics()
	m.countDroppedWarnings(fakeDropper(199995))
	n, err := testutil.GatherAndCount(m.reg, "plexus_extension_warnings_dropped_total")
	if err != nil || n != 1 {
		t.Fatalf("series %d, %v", n, err)
	}
	want := "# HELP plexus_extension_warnings_dropped_total Warnings extension modules returned past the cap of one call, counted instead of relayed.\n# TYPE plexus_extension_warnings_dropped_total counter\nplexus_extension_warnings_dropped_total 199995\n"
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "plexus_extension_warnings_dropped_total"); err != nil {
		t.Error(err)
	}
}

type fakeLister []extensions.ModuleState

func (f fakeLister) Modules() []extensions.ModuleState { return f }

// TestModuleStatesExported: each configured module is a series, 1 when
// loaded and 0 when refused.
func TestModuleStatesExported(t *testing.T) {
	m := newMetrics()
	var logs strings.Builder
	m.reportModules(fakeLister{
		{Name: "vlan", Version: "1.0.0", SHA256: "ab", Loaded: true},
		{Name: "bad", Path: "/x/bad.wasm", Err: "ABI version 2 is not supported"},
	}, slog.New(slog.NewTextHandler(&logs, nil)))
	want := `# HELP plexus_extension_module_loaded 1 for each configured extension module plexusd loaded, 0 for one it refused (its reason is in plexusd's log and the PlexusNode's status).
# TYPE plexus_extension_module_loaded gauge
plexus_extension_module_loaded{module="bad",sha256="",version=""} 0
plexus_extension_module_loaded{module="vlan",sha256="ab",version="1.0.0"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "plexus_extension_module_loaded"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "ABI version 2 is not supported") {
		t.Errorf("the refusal is not logged:\n%s", logs.String())
	}
}

// publishSource answers PublishStatus with err after delay.
type publishSource struct {
	source.Source
	delay time.Duration
	err   error
}

func (p publishSource) PublishStatus(context.Context, *source.Pod, []byte) error {
	time.Sleep(p.delay)
	return p.err
}

// TestStatusPublishTimed: every network-status write is timed, a failed
// one too, and a failed one is also counted as an API error.
func TestStatusPublishTimed(t *testing.T) {
	m := newMetrics()
	ok := countingSource{Source: publishSource{delay: 2 * time.Millisecond}, m: m}
	bad := countingSource{Source: publishSource{err: errors.New("etcd unavailable")}, m: m}
	if err := ok.PublishStatus(t.Context(), &source.Pod{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := bad.PublishStatus(t.Context(), &source.Pod{}, nil); err == nil {
		t.Fatal("the failed write's error was lost")
	}
	h := &dto.Metric{}
	if err := m.publish.Write(h); err != nil {
		t.Fatal(err)
	}
	if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 2 || sum < 0.002 {
		t.Errorf("publish histogram: %d samples summing to %v s, want 2 summing to at least 0.002", n, sum)
	}
	if got := testutil.ToFloat64(m.apiErrors.WithLabelValues("patch pod")); got != 1 {
		t.Errorf(`plexus_api_errors_total{call="patch pod"} = %v, want 1`, got)
	}
}

// TestDelReadsNoManifest: with the manifests source, a DEL's source reads
// no manifest, so a broken one fails the ADD that needs it but not the
// DEL's removal of the status file.
func TestDelReadsNoManifest(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, manifests.StatusDir, "demo_web.json")
	for p, content := range map[string]string{filepath.Join(dir, "broken.yaml"): "kind: [", status: "[]"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := &Daemon{m: newMetrics(), conf: &config.Config{Manifests: dir}, manifest: manifests.NewDir(dir)}
	o := d.options()
	if _, err := o.Source(nil, cniplugin.CmdAdd, nil); err == nil {
		t.Error("ADD's source parsed the broken manifest")
	}
	src, err := o.Source(nil, cniplugin.CmdDel, nil)
	if err != nil {
		t.Fatalf("DEL's source: %v", err)
	}
	r, ok := src.(source.StatusRemover)
	if !ok {
		t.Fatalf("DEL's source %T removes no status", src)
	}
	if err := r.RemoveStatus(context.Background(), "demo", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(status); !os.IsNotExist(err) {
		t.Errorf("status file left: %v", err)
	}
}
