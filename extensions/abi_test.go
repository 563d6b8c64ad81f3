package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/status"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

func TestParseBinaryReadsHeaderSections(t *testing.T) {
	f := fakeWasm{
		manifest: manifestJSON("x", "com.example.", `"prepare"`),
		imports:  []Import{{Module: abi.HostModule, Name: "input_read"}},
		exports:  []string{"prepare"},
		body:     bodyReturn0,
	}
	raw := f.bytes()
	b, err := ParseBinary(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Manifests) != 1 || string(b.Manifests[0]) != f.manifest {
		t.Fatalf("manifests = %q", b.Manifests)
	}
	if len(b.Imports) != 1 || b.Imports[0].Name != "input_read" || !b.ExportedFunc("prepare") || b.ExportedFunc("memory") {
		t.Fatalf("imports %v exports %v", b.Imports, b.Exports)
	}
}

func TestParseBinaryRefusesGarbage(t *testing.T) {
	good := fakeWasm{exports: []string{"prepare"}, body: bodyReturn0}.bytes()
	cases := map[string][]byte{
		"magic":     []byte("\x00elf\x01\x00\x00\x00"),
		"truncated": good[:len(good)-3],
		"oversized": append(bytes.Clone(good), 0x00, 0xff, 0xff, 0x03), // custom section longer than the file
	}
	for name, raw := range cases {
		if _, err := ParseBinary(bytes.NewReader(raw), int64(len(raw))); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestTwoManifestSectionsRefused(t *testing.T) {
	raw := fakeWasm{manifest: manifestJSON("x", "com.example.", ""), exports: []string{"prepare"}, body: bodyReturn0}.bytes()
	raw = wasmfmt.AppendCustomSection(raw, abi.ManifestSection, []byte(manifestJSON("y", "org.other.", "")))
	if _, err := declare(bytes.NewReader(raw), int64(len(raw))); err == nil || !strings.Contains(err.Error(), "2 \"plexus.manifest\" custom sections") {
		t.Fatalf("err = %v", err)
	}
}

func TestManifestValidation(t *testing.T) {
	cases := []struct{ manifest, want string }{
		{`{`, "invalid plexus.manifest"},
		{`{"abi":2,"name":"x","prefixes":["com.example."]}`, "ABI version 2 is not supported"},
		{`{"abi":1,"name":"X Y","prefixes":["com.example."]}`, `name "X Y"`},
		{`{"abi":1,"name":"x","prefixes":[]}`, "declares no key prefixes"},
		{`{"abi":1,"name":"x","prefixes":["vlan"]}`, "not reverse domain notation"},
		{`{"abi":1,"name":"x","prefixes":["com."]}`, "not reverse domain notation"},
		{`{"abi":1,"name":"x","prefixes":["Com.Example."]}`, "not a lower-case DNS label"},
		{`{"abi":1,"name":"x","prefixes":["1com.example."]}`, "not a top-level domain"},
		{`{"abi":1,"name":"x","prefixes":["com..example"]}`, "not a lower-case DNS label"},
		{`{"abi":1,"name":"x","prefixes":["com.example.","com.example.vlan"]}`, "overlap"},
		{`{"abi":1,"name":"x","prefixes":["com.example."],"hooks":["delete"]}`, `unknown hook "delete"`},
	}
	for _, c := range cases {
		_, err := ParseManifest([]byte(c.manifest))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.manifest, err, c.want)
		}
	}
	m, err := ParseManifest([]byte(`{"abi":1,"name":"ok","prefixes":["com.example."],"hooks":["enrich"],"future":1}`))
	if err != nil || !m.Has(abi.HookEnrich) || m.Has(abi.HookPrepare) {
		t.Fatalf("valid manifest: %+v, %v", m, err)
	}
}

func TestOwnershipIsByLabel(t *testing.T) {
	cases := []struct {
		prefix, key string
		owns        bool
	}{
		{"com.example.", "com.example.vlan", true},
		{"com.example.", "com.example.a.b", true},
		{"com.example.", "com.examples.vlan", false},
		{"io.plexus.overrides", "io.plexus.overrides", true},
		{"io.plexus.overrides", "io.plexus.overrides.mtu", true},
		{"io.plexus.overrides", "io.plexus.overridesx", false},
	}
	for _, c := range cases {
		if got := Owns(c.prefix, c.key); got != c.owns {
			t.Errorf("Owns(%q, %q) = %v", c.prefix, c.key, got)
		}
	}
}

func TestOverlapNamesBothModules(t *testing.T) {
	a := &Manifest{Name: "vlan", Prefixes: []string{"com.example."}}
	b := &Manifest{Name: "qos", Prefixes: []string{"org.qos.", "com.example.qos."}}
	c := &Manifest{Name: "other", Prefixes: []string{"com.examples."}}
	err := clash(a, b)
	if err == nil || !strings.Contains(err.Error(), `module "vlan" prefix "com.example." overlaps module "qos" prefix "com.example.qos."`) {
		t.Fatalf("err = %v", err)
	}
	if err := clash(a, c); err != nil {
		t.Fatalf("disjoint prefixes: %v", err)
	}
}

func TestImportAllowList(t *testing.T) {
	ok := []Import{{Module: abi.WASIModule, Name: "fd_write"}, {Module: abi.HostModule, Name: "output_write"}}
	if err := checkImports(ok); err != nil {
		t.Fatalf("allowed imports refused: %v", err)
	}
	cases := []struct {
		imp  Import
		want string
	}{
		{Import{Module: "env", Name: "evil"}, "import env.evil is not allowed"},
		{Import{Module: abi.WASIModule, Name: "sock_accept"}, "import wasi_snapshot_preview1.sock_accept is not allowed"},
		{Import{Module: abi.HostModule, Name: "exec"}, "import plexus.exec is not allowed"},
		{Import{Module: "env", Name: "memory", Kind: wasmfmt.KindMemory}, "only functions may be imported"},
	}
	for _, c := range cases {
		err := checkImports(append(ok, c.imp))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.imp, err, c.want)
		}
	}
}

func TestReadDeclarationRefusals(t *testing.T) {
	good := manifestJSON("x", "com.example.", `"prepare"`)
	cases := []struct {
		name string
		f    fakeWasm
		want string
	}{
		{"no manifest", fakeWasm{exports: []string{"prepare"}, body: bodyReturn0}, "missing declaration"},
		{"sock_accept", fakeWasm{manifest: good, exports: []string{"prepare"}, body: bodyReturn0,
			imports: []Import{{Module: abi.WASIModule, Name: "sock_accept"}}}, "sock_accept is not allowed"},
		{"command", fakeWasm{manifest: good, exports: []string{"prepare", "_start"}, body: bodyReturn0}, "exports _start"},
		{"hook missing", fakeWasm{manifest: good, exports: []string{"enrich"}, body: bodyReturn0}, `declares hook "prepare" but does not export it`},
	}
	for _, c := range cases {
		_, err := ReadDeclaration(c.f.write(t, "m.wasm"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestConfigChangeGuard(t *testing.T) {
	conf := `{"cniVersion":"1.0.0","name":"br","type":"bridge","mtu":1500}`
	list := `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge"},{"type":"tuning"}]}`
	cases := []struct{ old, new, want string }{
		{conf, `{"cniVersion":"1.0.0","name":"br","type":"bridge","mtu":1400}`, ""},
		{conf, `{"cniVersion":"1.0.0","name":"br","type":"macvlan"}`, `may not change "type" of the config`},
		{conf, `{"cniVersion":"0.4.0","name":"br","type":"bridge"}`, `may not change "cniVersion"`},
		{conf, `{"cniVersion":"1.0.0","type":"bridge"}`, `may not change "name"`},
		{conf, `{"cniVersion":"1.0.0","name":"br","type":"bridge","args":{"cni":{}}}`, `may not change "args"`},
		{conf, `[]`, "not a JSON object"},
		{conf, `{"cniVersion":"1.0.0","name":"br","type":"bridge","plugins":[]}`, "config list"},
		{list, `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge","vlan":2},{"type":"tuning"}]}`, ""},
		{list, `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge"}]}`, "may not add or remove plugins (2 before, 1 returned)"},
		{list, `{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge"},{"type":"portmap"}]}`, `may not change "type" of the plugin 1`},
	}
	for _, c := range cases {
		err := checkConfigChange(json.RawMessage(c.old), json.RawMessage(c.new))
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: err = %v, want %q", c.old, c.new, err, c.want)
		}
	}
}

func TestPlanPrepareArgs(t *testing.T) {
	a := &pipeline.Attachment{
		Config:     json.RawMessage(`{"type":"bridge"}`),
		CNIArgs:    [][2]string{{"K8S_POD_NAME", "p"}},
		ConfigArgs: map[string]any{"ips": []any{"10.0.0.1"}},
	}
	for _, out := range []*wireOutput{
		{AddCNIArgs: map[string]string{"K8S_POD_NAME": "x"}},
		{AddCNIArgs: map[string]string{"A;B": "x"}},
		{AddConfigArgs: map[string]json.RawMessage{"ips": json.RawMessage(`[]`)}},
		// A delegate reads "IPS" as "ips" (encoding/json folds case).
		{AddConfigArgs: map[string]json.RawMessage{"IPS": json.RawMessage(`[]`)}},
		{AddConfigArgs: map[string]json.RawMessage{"vendor": json.RawMessage(`1`), "Vendor": json.RawMessage(`2`)}},
	} {
		if _, err := planPrepare(a, out); err == nil {
			t.Errorf("%+v: want a refusal", out)
		}
	}
	plan, err := planPrepare(a, &wireOutput{AddCNIArgs: map[string]string{"VLAN": "7"}, AddConfigArgs: map[string]json.RawMessage{"vendor": json.RawMessage(`{"x":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	plan.apply(a)
	if len(a.CNIArgs) != 2 || a.CNIArgs[1] != [2]string{"VLAN", "7"} || a.ConfigArgs["vendor"] == nil {
		t.Fatalf("applied: %+v", a)
	}
}

func TestStatusKeyGuard(t *testing.T) {
	d := &Declaration{Manifest: Manifest{Name: "x", Prefixes: []string{"io.plexus.status."}}}
	cases := []struct{ key, want string }{
		{"ips", "reserved by the specification (s5.3)"},
		{"org.other.key", "outside the module's prefixes"},
		{"io.plexus.statusx", "outside the module's prefixes"},
	}
	for _, c := range cases {
		err := checkStatusKeys(d, map[string]json.RawMessage{c.key: json.RawMessage(`1`)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.key, err, c.want)
		}
	}
	if err := checkStatusKeys(d, map[string]json.RawMessage{"io.plexus.status.gw": json.RawMessage(`"1.1.1.1"`)}); err != nil {
		t.Fatal(err)
	}
}

func TestParseConfig(t *testing.T) {
	conf := `{"cniVersion":"1.0.0","name":"plexus","type":"plexus","extensions":{
	  "unownedKeys":"fail","cacheDir":"/var/cache/plexus",
	  "modules":[{"path":"/opt/vlan.wasm","config":{"a":1},"memoryLimit":"32Mi","timeout":"250ms",
	    "maxOutputBytes":4096,"prepareFailure":"ignore","enrichFailure":"fail"}]}}`
	cfg, err := ParseConfig([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	l, err := cfg.Modules[0].limits()
	if err != nil {
		t.Fatal(err)
	}
	want := limits{memoryPages: 512, timeout: 250 * time.Millisecond, maxOutput: 4096, prepareFailure: PolicyIgnore, enrichFailure: PolicyFail}
	if l != want || cfg.UnownedKeys != PolicyFail || string(cfg.Modules[0].Config) != `{"a":1}` {
		t.Fatalf("limits = %+v, cfg = %+v", l, cfg)
	}
	d, _ := (&ModuleConfig{Path: "x"}).limits()
	if d.memoryPages != DefaultMemoryLimitPages || d.prepareFailure != PolicyFail || d.enrichFailure != PolicyIgnore {
		t.Fatalf("defaults = %+v", d)
	}
	for _, bad := range []string{
		`{"extensions":{"unownedKeys":"maybe"}}`,
		`{"extensions":{"modules":[{"path":"x","memoryLimit":"1000"}]}}`,
		`{"extensions":{"modules":[{"path":"x","memoryLimit":"64Mi","memoryLimitPages":3}]}}`,
		`{"extensions":{"modules":[{"path":"x","prepareFailure":"retry"}]}}`,
		`{"extensions":{"modules":[{"path":"x","timeout":"soon"}]}}`,
		`{"extensions":{"modules":[{"config":{}}]}}`,
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

// A module's timeout is a config duration: refused by its key's path.
func TestParseConfigNamesBadTimeouts(t *testing.T) {
	for v, want := range map[string]string{
		`"soon"`: `plugin config: "extensions.modules.timeout": "soon" is not a duration`,
		`"-1s"`:  `plugin config: "extensions.modules.timeout": "-1s" must be positive`,
		`"0s"`:   `plugin config: "extensions.modules.timeout": "0s" must be positive`,
		`250`:    `plugin config: "extensions.modules.timeout": 250 is not a duration string`,
	} {
		_, err := ParseConfig([]byte(`{"extensions":{"modules":[{"path":"x","timeout":` + v + `}]}}`))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("timeout %s: %v, want %s", v, err, want)
		}
	}
}

// A module that owns keys but has no prepare hook is never compiled by
// Prepare; unowned keys warn or fail as configured.
func TestUnownedKeys(t *testing.T) {
	path := fakeWasm{manifest: manifestJSON("st", "io.plexus.status.", ""), exports: []string{}}.write(t, "st.wasm")
	req := func(warn func(string)) *pipeline.PrepareRequest {
		return &pipeline.PrepareRequest{Warn: warn, Attachment: &pipeline.Attachment{
			Selection: &selection.Element{Index: 0, Namespace: "ns", Name: "net", Extensions: map[string]json.RawMessage{
				"io.plexus.status.x": json.RawMessage(`1`), "org.nobody.key": json.RawMessage(`2`),
			}},
		}}
	}
	ctx := context.Background()
	h, err := New(ctx, Config{Modules: []ModuleConfig{{Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	ignored := map[string]string{}
	r := req(func(s string) { warnings = append(warnings, s) })
	r.Ignore = func(k, reason string) { ignored[k] = reason }
	if err := h.Prepare(ctx, r); err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `no extension owns key "org.nobody.key"`) {
		t.Fatalf("warnings = %q", warnings)
	}
	// The pod's status entry lists it too (io.plexus.ignored).
	if len(ignored) != 1 || ignored["org.nobody.key"] == "" {
		t.Errorf("ignored = %v, want the unowned key only", ignored)
	}
	if h.modules[0].compiled != nil {
		t.Fatal("a module without a prepare hook was compiled")
	}
	h, _ = New(ctx, Config{Modules: []ModuleConfig{{Path: path}}, UnownedKeys: PolicyFail})
	if err := h.Prepare(ctx, req(nil)); err == nil || !strings.Contains(err.Error(), `"org.nobody.key"`) {
		t.Fatalf("err = %v, want the unowned key named", err)
	}
}

func TestEnrichNeedsEntry(t *testing.T) {
	h, err := New(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := &status.Entry{Name: "x"}
	if err := h.Enrich(context.Background(), &pipeline.EnrichRequest{Attachment: &pipeline.Attachment{}, Entry: e}); err != nil || e.Extra != nil {
		t.Fatalf("no modules: err %v, extra %v", err, e.Extra)
	}
}

// The enrich input carries the whole status entry, reverse-domain keys
// included, and still decodes as the SDK's abi.EnrichRequest.
func TestEnrichInputSendsTheWholeEntry(t *testing.T) {
	entry := &status.Entry{Name: "ns/net", Interface: "net1", IPs: []string{"10.0.0.2"}}
	if err := entry.SetExtra("com.other.id", json.RawMessage(`7`)); err != nil {
		t.Fatal(err)
	}
	m := &module{config: []byte(`{"k":1}`)}
	req := prepareReq(bridgeConf, map[string]string{"com.example.vlan": "5"}, nil)
	in, err := newEnrichInput(m, &pipeline.EnrichRequest{Pod: req.Pod, Attachment: req.Attachment, Entry: entry}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || string(raw.Status["com.other.id"]) != "7" {
		t.Fatalf("status sent = %s (%v), want the entry's reverse-domain key", raw.Status, err)
	}
	var got abi.EnrichRequest
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Hook != abi.HookEnrich || got.Status.Name != "ns/net" || got.Status.Interface != "net1" ||
		len(got.Status.IPs) != 1 || string(got.ModuleConfig) != `{"k":1}` || got.Pod.Name != req.Pod.Name {
		t.Fatalf("decoded %+v from %s", got, b)
	}
}
