package nodestate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned/fake"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/extensions"
)

// fakeAPI records the apply patches a Reporter sends; a PlexusNode exists
// once the bare object was applied.
type fakeAPI struct {
	mu      sync.Mutex
	exists  bool
	fail    error
	applies []applied
}

type applied struct {
	subresource string
	manager     string
	body        map[string]any
}

func (f *fakeAPI) client() *fake.Clientset {
	c := fake.NewSimpleClientset()
	c.PrependReactor("patch", "plexusnodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchActionImpl)
		f.mu.Lock()
		defer f.mu.Unlock()
		if p.PatchType != types.ApplyPatchType {
			return true, nil, errors.New("not an apply patch")
		}
		if f.fail != nil {
			return true, nil, f.fail
		}
		var body map[string]any
		if err := json.Unmarshal(p.Patch, &body); err != nil {
			return true, nil, err
		}
		f.applies = append(f.applies, applied{p.Subresource, p.PatchOptions.FieldManager, body})
		if p.Subresource == "status" && !f.exists {
			return true, nil, apierrors.NewNotFound(plexusapi.PlexusNodes.GroupResource(), p.Name)
		}
		f.exists = true
		return true, nil, nil
	})
	return c
}

func newTestReporter(t *testing.T, api *fakeAPI, in *Install) *Reporter {
	t.Helper()
	r, err := New(Options{
		Client: api.client(), Node: "node-a", FieldManager: ManagerPlexusd, Mode: ModeThick, Version: "v1",
		Install: func() Install { return *in },
		Now:     func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReporterWritesOnlyChanges(t *testing.T) {
	bin := t.TempDir()
	exe(t, bin, "bridge")
	in := &Install{ConfigInstalled: true, ConfigPath: "/etc/cni/net.d/00-plexus.conflist", DefaultNetwork: "pod-net",
		DefaultNetworkFile: "/etc/cni/net.d/10-default.conflist", Plugins: []string{"bridge", "host-local"}, BinDirs: []string{bin}}
	api := &fakeAPI{}
	r := newTestReporter(t, api, in)
	ctx := context.Background()

	steps := []struct {
		name   string
		change func()
		// want are the subresources applied, in order.
		want []string
	}{
		{"first write creates the object, then applies the status", func() {}, []string{"status", "", "status"}},
		{"nothing changed: no request", func() {}, nil},
		{"a change: one status apply", func() { in.DefaultNetwork = "other" }, []string{"status"}},
		{"a binary appears: missingPlugins changes", func() { exe(t, bin, "host-local") }, []string{"status"}},
		{"still nothing changed", func() {}, nil},
	}
	for _, s := range steps {
		api.applies = nil
		s.change()
		if _, err := r.PublishIfChanged(ctx); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var got []string
		for _, a := range api.applies {
			got = append(got, a.subresource)
			if a.manager != ManagerPlexusd {
				t.Errorf("%s: field manager %q", s.name, a.manager)
			}
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: applied %q, want %q", s.name, got, s.want)
		}
	}
}

func TestReporterStatusBody(t *testing.T) {
	in := &Install{ConfigPath: "/c", Plugins: []string{"bridge", "../evil", "bridge"}, BinDirs: []string{t.TempDir()}}
	api := &fakeAPI{exists: true}
	r := newTestReporter(t, api, in)
	r.o.Policy = func() *plexusapi.NodePolicy { return &plexusapi.NodePolicy{Source: "none"} }
	if _, err := r.PublishIfChanged(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(api.applies) != 1 {
		t.Fatalf("applies: %v", api.applies)
	}
	b := api.applies[0].body
	md, _ := b["metadata"].(map[string]any)
	st, _ := b["status"].(map[string]any)
	pol, _ := st["policy"].(map[string]any)
	for what, ok := range map[string]bool{
		"name is the node's": md["name"] == "node-a",
		"kind":               b["kind"] == plexusapi.KindPlexusNode,
		"configInstalled false is sent, not left": st["configInstalled"] == false,
		"mode":        st["mode"] == ModeThick,
		"updated set": st["updated"] == "2026-01-02T03:04:05Z",
		"missing plugin listed once, a path never": reflect.DeepEqual(st["missingPlugins"], []any{"bridge"}),
		"no null policy since":                     pol != nil && !hasKey(pol, "since"),
	} {
		if !ok {
			t.Errorf("%s: body %v", what, b)
		}
	}
}

func TestReporterFailedWriteIsRetried(t *testing.T) {
	in := &Install{ConfigInstalled: true}
	api := &fakeAPI{exists: true, fail: apierrors.NewForbidden(plexusapi.PlexusNodes.GroupResource(), "node-a", errors.New("denied"))}
	r := newTestReporter(t, api, in)
	if _, err := r.PublishIfChanged(context.Background()); !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want Forbidden", err)
	}
	api.fail = nil
	// The failed status was not recorded as published: the same status
	// is written on the next pass.
	if wrote, err := r.PublishIfChanged(context.Background()); err != nil || !wrote {
		t.Fatalf("after the failure: wrote %v, err %v; want a write", wrote, err)
	}
}

func TestReporterRunFollowsNotify(t *testing.T) {
	in := &Install{}
	var mu sync.Mutex
	api := &fakeAPI{exists: true}
	r := newTestReporter(t, api, &Install{})
	r.o.Install = func() Install { mu.Lock(); defer mu.Unlock(); return *in }
	r.o.Now, r.o.MinInterval = time.Now, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Notify() // the agent's first pass
	waitApplies(t, api, 1)
	mu.Lock()
	in.ConfigInstalled = true
	mu.Unlock()
	r.Notify()
	waitApplies(t, api, 2)
	cancel()
	<-done
	api.mu.Lock()
	defer api.mu.Unlock()
	if st, _ := api.applies[1].body["status"].(map[string]any); st["configInstalled"] != true {
		t.Errorf("second write %v, want configInstalled true", api.applies[1].body)
	}
}

func waitApplies(t *testing.T, api *fakeAPI, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		api.mu.Lock()
		got := len(api.applies)
		api.mu.Unlock()
		if got >= n {
			return
		}
	}
	t.Fatalf("fewer than %d applies", n)
}

func TestNewRejects(t *testing.T) {
	c := fake.NewSimpleClientset()
	inst := func() Install { return Install{} }
	for name, o := range map[string]Options{
		"no client":  {Node: "n", FieldManager: "m", Mode: ModeThin, Install: inst},
		"no node":    {Client: c, FieldManager: "m", Mode: ModeThin, Install: inst},
		"no install": {Client: c, Node: "n", FieldManager: "m", Mode: ModeThin},
		"bad mode":   {Client: c, Node: "n", FieldManager: "m", Mode: "thicc", Install: inst},
		"no manager": {Client: c, Node: "n", Mode: ModeThin, Install: inst},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestMissingPlugins(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	exe(t, a, "bridge")
	exe(t, b, "host-local")
	if err := os.WriteFile(filepath.Join(a, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(a, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		types []string
		want  []string
	}{
		{"present in either dir", []string{"bridge", "host-local"}, nil},
		{"absent, sorted, once", []string{"vlan", "macvlan", "vlan"}, []string{"macvlan", "vlan"}},
		{"not executable or not a file", []string{"noexec", "dir"}, []string{"dir", "noexec"}},
		{"paths are never looked up", []string{"../bridge", "/bin/sh", ".hidden", ""}, nil},
	} {
		if got := MissingPlugins(tc.types, []string{a, "", b}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func exe(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// TestReporterWithoutKind: without the CRD the create is NotFound too;
// that is ErrNoKind, which Run does not retry until the next change.
func TestReporterWithoutKind(t *testing.T) {
	c := fake.NewSimpleClientset()
	calls := 0
	c.PrependReactor("patch", "plexusnodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		return true, nil, apierrors.NewNotFound(plexusapi.PlexusNodes.GroupResource(), "node-a")
	})
	r, err := New(Options{Client: c, Node: "node-a", FieldManager: ManagerInstaller, Mode: ModeThin, Install: func() Install { return Install{} }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PublishIfChanged(context.Background()); !errors.Is(err, ErrNoKind) || calls != 2 {
		t.Errorf("err = %v after %d requests, want ErrNoKind after 2 (status apply, create)", err, calls)
	}
}

// A report within the CRD's bounds: an API server refusing an oversize
// error or list would refuse every later write too.
func TestStatusKeepsWithinTheCRDBounds(t *testing.T) {
	in := &Install{}
	r := newTestReporter(t, &fakeAPI{exists: true}, in)
	long := strings.Repeat("é", maxErrorBytes)
	r.o.Policy = func() *plexusapi.NodePolicy { return &plexusapi.NodePolicy{Source: "object", Error: long} }
	exts := make([]extensions.ModuleState, MaxExtensions+5)
	for i := range exts {
		exts[i] = extensions.ModuleState{Path: fmt.Sprintf("/m%d.wasm", i), Err: long}
	}
	r.o.Extensions = func() []extensions.ModuleState { return exts }
	st := r.Status()
	if n := len(st.Policy.Error); n > maxErrorBytes || !utf8.ValidString(st.Policy.Error) {
		t.Errorf("policy error: %d bytes, valid UTF-8 %v", n, utf8.ValidString(st.Policy.Error))
	}
	if len(st.Extensions) != MaxExtensions {
		t.Errorf("extensions: %d, want %d", len(st.Extensions), MaxExtensions)
	}
	for _, e := range st.Extensions {
		if len(e.Error) > maxErrorBytes || !strings.HasSuffix(e.Error, "...") || !utf8.ValidString(e.Error) {
			t.Fatalf("extension error: %d bytes, ends %q", len(e.Error), e.Error[len(e.Error)-12:])
		}
	}
	if exts[0].Err != long {
		t.Error("the provider's slice was changed")
	}
}

// The node's report carries every module, the refused ones with their
// reasons.
func TestStatusReportsRefusedModules(t *testing.T) {
	r := newTestReporter(t, &fakeAPI{exists: true}, &Install{})
	r.o.Extensions = func() []extensions.ModuleState {
		return []extensions.ModuleState{
			{Name: "vlan", Version: "1.0.0", Path: "/opt/plexus/extensions/vlan/module.wasm", SHA256: "ab", Loaded: true},
			{Path: "/opt/plexus/extensions/bad/module.wasm", Err: "no plexus.manifest section"},
		}
	}
	want := []plexusapi.NodeExtension{
		{Name: "vlan", Version: "1.0.0", Path: "/opt/plexus/extensions/vlan/module.wasm", SHA256: "ab", Loaded: true},
		{Path: "/opt/plexus/extensions/bad/module.wasm", Error: "no plexus.manifest section"},
	}
	if got := r.Status().Extensions; !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
