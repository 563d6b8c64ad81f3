package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
	"github.com/plexus-cni/plexus/extensions/wasmbin"
	"github.com/plexus-cni/plexus/sdk/abi"
)

const bridgeConf = `{"cniVersion":"1.0.0","name":"net","type":"bridge","bridge":"br0"}`

// prepareReq is an attachment of pod ns/pod to ns/net with the given
// selection keys.
func prepareReq(conf string, keys map[string]string, warn func(string)) *pipeline.PrepareRequest {
	ext := map[string]json.RawMessage{}
	for k, v := range keys {
		ext[k] = json.RawMessage(v)
	}
	return &pipeline.PrepareRequest{
		Pod:  &source.Pod{Namespace: "ns", Name: "pod", UID: "u1"},
		Warn: warn,
		Attachment: &pipeline.Attachment{
			Index: 0, Name: "ns/net", IfName: "net1", Config: json.RawMessage(conf),
			CNIArgs:   [][2]string{{"K8S_POD_NAME", "pod"}},
			Selection: &selection.Element{Index: 0, Namespace: "ns", Name: "net", Extensions: ext},
		},
	}
}

func newHost(t testing.TB, cfg Config) *Host {
	t.Helper()
	if cfg.CacheDir == "" {
		dir, err := compiledDir()
		if err != nil {
			t.Fatal(err)
		}
		cfg.CacheDir = dir
	}
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

type warnings []string

func (w *warnings) add(s string) { *w = append(*w, s) }

func TestVlanThroughHost(t *testing.T) {
	h := newHost(t, Config{Modules: []ModuleConfig{{Path: wasmPath(t, "vlan")}}})
	ctx := context.Background()
	req := prepareReq(bridgeConf, map[string]string{"com.example.vlan": "100"}, nil)
	if err := h.Prepare(ctx, req); err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(req.Attachment.Config, &conf); err != nil {
		t.Fatal(err)
	}
	if conf["vlan"] != float64(100) || conf["type"] != "bridge" {
		t.Fatalf("config = %s", req.Attachment.Config)
	}
	req = prepareReq(`{"cniVersion":"1.0.0","name":"net","type":"macvlan"}`, map[string]string{"com.example.vlan": "100"}, nil)
	err := h.Prepare(ctx, req)
	var he *HookError
	if !errors.As(err, &he) || !he.Rejected || !strings.Contains(err.Error(), `extension "vlan" rejected the attachment (prepare)`) ||
		!strings.Contains(err.Error(), "no bridge or vlan plugin") {
		t.Fatalf("err = %v, want a rejection", err)
	}
	// A rejection is not a failure: the instance lives on.
	if h.modules[0].inst == nil {
		t.Fatal("instance discarded after a rejection")
	}
	req = prepareReq(bridgeConf, map[string]string{"com.example.vlan": "5000"}, nil)
	if err := h.Prepare(ctx, req); err == nil || !strings.Contains(err.Error(), "between 1 and 4094, got 5000") {
		t.Fatalf("err = %v", err)
	}
}

func TestOverridesThroughHost(t *testing.T) {
	h := newHost(t, Config{Modules: []ModuleConfig{{
		Path: wasmPath(t, "overrides"), Config: json.RawMessage(`{"allow":["mtu"]}`),
	}}})
	ctx := context.Background()
	req := prepareReq(bridgeConf, map[string]string{"io.plexus.overrides": `{"mtu":1400}`}, nil)
	if err := h.Prepare(ctx, req); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(req.Attachment.Config), `"mtu":1400`) {
		t.Fatalf("config = %s", req.Attachment.Config)
	}
	req = prepareReq(bridgeConf, map[string]string{"io.plexus.overrides": `{"hairpinMode":true}`}, nil)
	if err := h.Prepare(ctx, req); err == nil || !strings.Contains(err.Error(), `key "hairpinMode" may not be overridden`) {
		t.Fatalf("err = %v", err)
	}
}

func TestEnricherThroughHost(t *testing.T) {
	h := newHost(t, Config{Modules: []ModuleConfig{{
		Path: wasmPath(t, "enricher"), Config: json.RawMessage(`{"annotations":["example.com/owner"]}`),
	}}})
	res, err := types100.NewResult([]byte(`{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/ns"}],
	  "ips":[{"address":"10.1.0.5/24","gateway":"10.1.0.1","interface":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a := &pipeline.Attachment{
		Name: "ns/net", IfName: "net1", Result: res,
		Selection: &selection.Element{Namespace: "ns", Name: "net"},
		NAD: &source.NAD{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "net",
			Annotations: map[string]string{"example.com/owner": "team-a"}}},
	}
	entry, err := status.FromResult(a.Name, a.IfName, false, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Enrich(context.Background(), &pipeline.EnrichRequest{Attachment: a, Entry: entry}); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(entry)
	want := `"io.plexus.status.annotations":{"example.com/owner":"team-a"},"io.plexus.status.gateways":["10.1.0.1"]`
	if !strings.Contains(string(out), want) {
		t.Fatalf("entry = %s\nwant %s", out, want)
	}
}

// Thin mode: a Prepare compiles only the modules owning the element's keys.
func TestThinModeLoadsOnlyOwners(t *testing.T) {
	h := newHost(t, Config{Modules: []ModuleConfig{
		{Path: wasmPath(t, "vlan")}, {Path: wasmPath(t, "overrides")}, {Path: wasmPath(t, "enricher")},
	}})
	if err := h.Prepare(context.Background(), prepareReq(bridgeConf, map[string]string{"com.example.vlan": "7"}, nil)); err != nil {
		t.Fatal(err)
	}
	for _, m := range h.modules {
		if loaded := m.compiled != nil; loaded != (m.name() == "vlan") {
			t.Errorf("module %s loaded = %v", m.name(), loaded)
		}
	}
}

func TestCompilationCache(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	files, err := Warm(ctx, dir, wasmPath(t, "vlan"))
	if err != nil || len(files) != 1 {
		t.Fatalf("warm: %v %v", files, err)
	}
	entries, _ := os.ReadDir(dir)
	var cached, locks int
	for _, e := range entries {
		switch {
		case strings.HasSuffix(e.Name(), ".lock"):
			locks++
		case !e.IsDir():
			cached++
		}
	}
	if locks != 1 {
		t.Fatalf("cache dir has %d lock files, want 1", locks)
	}
	// wazero keeps entries in a per-version subdirectory.
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(matches) == 0 {
		t.Fatalf("no compiled module in %s (entries %v)", dir, entries)
	}
	h := newHost(t, Config{CacheDir: dir, Modules: []ModuleConfig{{Path: wasmPath(t, "vlan")}}})
	if err := h.Prepare(ctx, prepareReq(bridgeConf, map[string]string{"com.example.vlan": "7"}, nil)); err != nil {
		t.Fatal(err)
	}
}

func TestForbiddenImportRefusedAtLoad(t *testing.T) {
	_, err := New(context.Background(), Config{Modules: []ModuleConfig{{Path: wasmPath(t, "evilimport")}}})
	if err == nil || !strings.Contains(err.Error(), `module "evilimport": import env.evil is not allowed`) {
		t.Fatalf("err = %v", err)
	}
}

func TestOverlappingModulesRefused(t *testing.T) {
	sub := fakeWasm{manifest: manifestJSON("vlan-sub", "com.example.sub.", "")}.write(t, "sub.wasm")
	_, err := New(context.Background(), Config{Modules: []ModuleConfig{{Path: wasmPath(t, "vlan")}, {Path: sub}}})
	if err == nil || !strings.Contains(err.Error(), `module "vlan" prefix "com.example." overlaps module "vlan-sub" prefix "com.example.sub."`) {
		t.Fatalf("err = %v", err)
	}
}

// Each hostile behaviour yields a clear error and discards the instance,
// with either way of enforcing the deadline (wazero's context check, or the
// deadline check compiled in for a long-lived host).
func TestHostileModules(t *testing.T) {
	cases := []struct {
		mode, hook string
		mc         ModuleConfig
		want       string
	}{
		{"loop", abi.HookPrepare, ModuleConfig{Timeout: Duration(100e6)}, "deadline of 100ms exceeded"},
		{"membomb", abi.HookPrepare, ModuleConfig{MemoryLimit: "32Mi", Timeout: Duration(20e9)}, "out of memory"},
		{"trap", abi.HookPrepare, ModuleConfig{}, "trap: wasm error: out of bounds memory access"},
		{"bigoutput", abi.HookPrepare, ModuleConfig{}, "exceeds the cap of 1048576 bytes"},
		{"changetype", abi.HookPrepare, ModuleConfig{}, `may not change "type" of the config`},
		{"changeargs", abi.HookPrepare, ModuleConfig{}, `may not change "args" of the config`},
		{"cniargs", abi.HookPrepare, ModuleConfig{}, `may not change CNI_ARGS key "K8S_POD_NAME"`},
		{"panic", abi.HookPrepare, ModuleConfig{}, "module error: panic in prepare hook: hostile panic"},
		{"unowned", abi.HookEnrich, ModuleConfig{EnrichFailure: PolicyFail}, `status key "org.other.key" is outside the module's prefixes`},
		{"reserved", abi.HookEnrich, ModuleConfig{EnrichFailure: PolicyFail}, `status key "ips" is reserved by the specification (s5.3)`},
		{"bigstatus", abi.HookEnrich, ModuleConfig{EnrichFailure: PolicyFail}, `status key "com.hostile.big": value of 921602 bytes exceeds the cap of 4096`},
	}
	trapped := map[string]bool{"loop": true, "membomb": true, "trap": true, "bigoutput": true}
	for _, c := range cases {
		for _, longLived := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/longLived=%v", c.mode, longLived), func(t *testing.T) {
				mc := c.mc
				mc.Path, mc.Config = wasmPath(t, "misbehave"), json.RawMessage(`{"mode":"`+c.mode+`"}`)
				if mc.Timeout == 0 {
					// Only "loop" is about the deadline: on a loaded
					// machine the default second must not fail the others.
					mc.Timeout = Duration(30e9)
				}
				h := newHost(t, Config{Modules: []ModuleConfig{mc}, LongLived: longLived})
				err := runHook(h, c.hook, nil)
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `extension "misbehave", hook `+c.hook) {
					t.Fatalf("err = %v\nwant %q", err, c.want)
				}
				if discarded := h.modules[0].inst == nil; discarded != trapped[c.mode] {
					t.Fatalf("instance discarded = %v", discarded)
				}
			})
		}
	}
}

// runHook runs one hook of h on a bridge attachment carrying a
// com.hostile. key.
func runHook(h *Host, hook string, warn func(string)) error {
	ctx := context.Background()
	req := prepareReq(bridgeConf, map[string]string{"com.hostile.x": "1"}, warn)
	if hook == abi.HookPrepare {
		return h.Prepare(ctx, req)
	}
	return h.Enrich(ctx, &pipeline.EnrichRequest{Attachment: req.Attachment, Entry: &status.Entry{Name: "ns/net"}, Warn: warn})
}

// A raw trap (the unreachable instruction) discards the instance; the next
// call gets a fresh one.
func TestRawTrapThenRecovers(t *testing.T) {
	trap := fakeWasm{manifest: manifestJSON("raw", "com.raw.", `"prepare"`), exports: []string{"prepare"}, body: bodyUnreachable}
	h := newHost(t, Config{Modules: []ModuleConfig{{Path: trap.write(t, "raw.wasm")}}})
	req := prepareReq(bridgeConf, map[string]string{"com.raw.k": "1"}, nil)
	err := h.Prepare(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "trap: wasm error: unreachable") {
		t.Fatalf("err = %v", err)
	}
	if h.modules[0].inst != nil {
		t.Fatal("instance kept after a trap")
	}
	loop := fakeWasm{manifest: manifestJSON("rawloop", "com.raw.", `"prepare"`), exports: []string{"prepare"}, body: bodyLoop}
	for _, longLived := range []bool{false, true} {
		h = newHost(t, Config{Modules: []ModuleConfig{{Path: loop.write(t, "loop.wasm"), Timeout: Duration(50e6)}}, LongLived: longLived})
		for i := 0; i < 2; i++ { // the second call runs in a new instance
			if err := h.Prepare(context.Background(), req); err == nil || !strings.Contains(err.Error(), "deadline of 50ms exceeded") {
				t.Fatalf("longLived=%v, call %d: err = %v", longLived, i, err)
			}
		}
	}
}

// A module the deadline rewriter refuses (here for a SIMD instruction)
// loads in plexusd as in thin mode, with wazero's context check in place of
// the rewriter's: it runs, it still stops at its deadline, and its memory
// is still capped.
func TestUnrewritableModuleFallsBackToContextCheck(t *testing.T) {
	manifest := manifestJSON("simd", "com.simd.", `"prepare"`)
	cases := []struct {
		name string
		body []byte
		mc   ModuleConfig
		want string
	}{
		// Returning 0 without output proves the hook ran.
		{"runs", bodyReturn0, ModuleConfig{}, "output is not a JSON object"},
		{"deadline", bodyLoop, ModuleConfig{Timeout: Duration(50e6)}, "deadline of 50ms exceeded"},
		// memory.grow returns -1 when the cap refuses the 64 pages.
		{"memory cap", bodyGrow64, ModuleConfig{MemoryLimitPages: 16}, "hook returned status 4294967295"},
	}
	for _, c := range cases {
		wasm := fakeWasm{manifest: manifest, exports: []string{"prepare"}, body: append(slices.Clone(simd), c.body...)}
		if _, err := wasmbin.AddDeadlineCheck(wasm.bytes()); !errors.Is(err, wasmbin.ErrFormat) {
			t.Fatalf("%s: the rewriter took the module (err = %v); the test needs one it refuses", c.name, err)
		}
		for _, longLived := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/longLived=%v", c.name, longLived), func(t *testing.T) {
				mc := c.mc
				mc.Path = wasm.write(t, "simd.wasm")
				h := newHost(t, Config{Modules: []ModuleConfig{mc}, LongLived: longLived})
				err := h.Prepare(context.Background(), prepareReq(bridgeConf, map[string]string{"com.simd.k": "1"}, nil))
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v\nwant %q", err, c.want)
				}
				if h.modules[0].ticked {
					t.Fatal("module marked as carrying the rewriter's deadline check")
				}
			})
		}
	}
	// The control: without the SIMD instruction plexusd's host rewrites,
	// and a thin plugin's keeps wazero's check.
	plain := fakeWasm{manifest: manifest, exports: []string{"prepare"}, body: bodyReturn0}
	for _, longLived := range []bool{false, true} {
		h := newHost(t, Config{Modules: []ModuleConfig{{Path: plain.write(t, "plain.wasm")}}, LongLived: longLived})
		_ = h.Prepare(context.Background(), prepareReq(bridgeConf, map[string]string{"com.simd.k": "1"}, nil))
		if h.modules[0].ticked != longLived {
			t.Fatalf("longLived=%v: module rewritten = %v", longLived, h.modules[0].ticked)
		}
	}
}

// A hook that writes no output breaks the ABI: an empty output is not JSON.
func TestNoOutputIsAnError(t *testing.T) {
	quiet := fakeWasm{manifest: manifestJSON("quiet", "com.quiet.", `"prepare"`), exports: []string{"prepare"}, body: bodyReturn0}
	h := newHost(t, Config{Modules: []ModuleConfig{{Path: quiet.write(t, "q.wasm")}}})
	err := h.Prepare(context.Background(), prepareReq(bridgeConf, map[string]string{"com.quiet.k": "1"}, nil))
	if err == nil || !strings.Contains(err.Error(), "output is not a JSON object") {
		t.Fatalf("err = %v", err)
	}
}

func TestFailurePolicies(t *testing.T) {
	mc := ModuleConfig{Path: wasmPath(t, "misbehave"), Config: json.RawMessage(`{"mode":"panic"}`), PrepareFailure: PolicyIgnore}
	h := newHost(t, Config{Modules: []ModuleConfig{mc}})
	var w warnings
	req := prepareReq(bridgeConf, map[string]string{"com.hostile.x": "1"}, w.add)
	if err := h.Prepare(context.Background(), req); err != nil {
		t.Fatalf("prepare with ignore policy: %v", err)
	}
	if string(req.Attachment.Config) != bridgeConf || len(w) != 1 || !strings.Contains(w[0], "ignored by the module's failure policy") {
		t.Fatalf("config %s, warnings %q", req.Attachment.Config, w)
	}
	// enrich defaults to ignore: the entry stays unenriched, with a warning.
	h = newHost(t, Config{Modules: []ModuleConfig{{Path: mc.Path, Config: mc.Config}}})
	w = nil
	if err := runHook(h, abi.HookEnrich, w.add); err != nil {
		t.Fatalf("enrich: %v", err)
	}
	if len(w) != 1 || !strings.Contains(w[0], "panic in enrich hook") {
		t.Fatalf("warnings %q", w)
	}
}

func TestEnrichAllAndWarningsRelayed(t *testing.T) {
	h := newHost(t, Config{Modules: []ModuleConfig{{Path: wasmPath(t, "misbehave"), Config: json.RawMessage(`{"mode":"addcniargs"}`)}}})
	var w warnings
	req := prepareReq(bridgeConf, map[string]string{"com.hostile.x": "1"}, w.add)
	if err := h.Prepare(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := req.Attachment.CNIArgs; len(got) != 2 || got[1] != [2]string{"HOSTILE", "1"} {
		t.Fatalf("CNI args = %v", got)
	}
	if len(w) != 1 || w[0] != `extension "misbehave" (prepare): added HOSTILE` {
		t.Fatalf("warnings = %q", w)
	}
	// enrichAll: called for the default network, which has no selection.
	e := &status.Entry{Name: "cluster/default", Default: true}
	a := &pipeline.Attachment{Index: -1, Default: true, Name: "cluster/default"}
	if err := h.Enrich(context.Background(), &pipeline.EnrichRequest{Attachment: a, Entry: e}); err != nil {
		t.Fatal(err)
	}
	if string(e.Extra["com.hostile.seen"]) != `"cluster/default"` {
		t.Fatalf("extra = %v", e.Extra)
	}
}

// TestWarningsCappedPerCall: a module's flood of warnings reaches the pod's
// owner as one message (one Event) with the first few, and the rest are
// counted, not relayed.
func TestWarningsCappedPerCall(t *testing.T) {
	// The flood is 200,000 host calls: a deadline well above the default's
	// keeps this a test of the cap, not of the machine's load.
	mc := ModuleConfig{Path: wasmPath(t, "misbehave"), Config: json.RawMessage(`{"mode":"warnflood"}`), Timeout: Duration(30e9)}
	h := newHost(t, Config{Modules: []ModuleConfig{mc}})
	var w warnings
	if err := runHook(h, abi.HookPrepare, w.add); err != nil {
		t.Fatal(err)
	}
	if len(w) != 1 || !strings.HasPrefix(w[0], `extension "misbehave" (prepare): w; w; w; w; w (199995 more warnings not shown)`) {
		t.Fatalf("warnings = %.300q", w)
	}
	if n := h.DroppedWarnings(); n != 199995 {
		t.Errorf("DroppedWarnings = %d, want 199995", n)
	}
}

// The module sees only its own keys (and its config), nothing else of the
// selection element.
func TestModuleSeesOnlyOwnedKeys(t *testing.T) {
	h := newHost(t, Config{Modules: []ModuleConfig{
		{Path: wasmPath(t, "misbehave"), Config: json.RawMessage(`{"mode":"echo"}`)},
		{Path: wasmPath(t, "vlan")},
	}})
	var w warnings
	req := prepareReq(bridgeConf, map[string]string{"com.hostile.x": "1", "com.example.vlan": "9"}, w.add)
	if err := h.Prepare(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(w) != 1 {
		t.Fatalf("warnings = %q", w)
	}
	echoed := strings.TrimPrefix(w[0], `extension "misbehave" (prepare): `)
	var in struct {
		Keys    map[string]json.RawMessage `json:"keys"`
		Pod     abi.Pod                    `json:"pod"`
		Network abi.Network                `json:"network"`
		CNIArgs map[string]string          `json:"cniArgs"`
	}
	if err := json.Unmarshal([]byte(echoed), &in); err != nil {
		t.Fatalf("echo %q: %v", echoed, err)
	}
	if len(in.Keys) != 1 || string(in.Keys["com.hostile.x"]) != "1" || in.Pod.UID != "u1" ||
		in.Network.StatusName != "ns/net" || in.CNIArgs["K8S_POD_NAME"] != "pod" {
		t.Fatalf("module input = %s", echoed)
	}
	// vlan ran after it, on the config as misbehave left it.
	if !strings.Contains(string(req.Attachment.Config), `"vlan":9`) {
		t.Fatalf("config = %s", req.Attachment.Config)
	}
}
