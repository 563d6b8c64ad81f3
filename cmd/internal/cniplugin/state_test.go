package cniplugin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/core/record"
)

// cheapDelegate answers libcni in-process, as a plugin that attaches
// nothing would: plexus's own files, and libcni's result cache, are
// written exactly as with real plugins, without a process per call.
type cheapDelegate struct{}

func (cheapDelegate) ExecPlugin(_ context.Context, _ string, stdin []byte, environ []string) ([]byte, error) {
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, err
	}
	for _, e := range environ {
		switch e {
		case "CNI_COMMAND=ADD":
			return []byte(`{"cniVersion":"` + conf.CNIVersion + `","interfaces":[{"name":"x"}],"ips":[{"address":"10.0.0.2/24","interface":0}]}`), nil
		case "CNI_COMMAND=VERSION":
			return []byte(`{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}`), nil
		}
	}
	return nil, nil
}

func (cheapDelegate) FindInPath(plugin string, _ []string) (string, error) {
	return "/cheap/" + plugin, nil
}

func (cheapDelegate) Decode(b []byte) (version.PluginInfo, error) {
	return version.PluginSupports("1.0.0", "1.1.0"), nil
}

// stateFixture is plexusd's handler with the manifests source (one pod,
// one NAD) and the cheap delegate for the default network and the NAD.
type stateFixture struct {
	dir, cache string
	o          Options
	// args are the calls' CNI_ARGS: pod web's (one selection) unless
	// set.
	args string
}

func newStateFixture(t testing.TB) *stateFixture {
	dir := t.TempDir()
	f := &stateFixture{dir: dir, cache: filepath.Join(dir, "cache")}
	manifests := filepath.Join(dir, "manifests")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "default.conflist"), `{"cniVersion":"1.1.0","name":"default","plugins":[{"type":"cheap"}]}`)
	write(filepath.Join(manifests, "pod.yaml"), `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: demo, uid: "1234", annotations: {k8s.v1.cni.cncf.io/networks: net-a}}
spec: {nodeName: node1}
---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: demo, uid: "5678"}
spec: {nodeName: node1}
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: net-a, namespace: demo}
spec: {config: '{"cniVersion":"1.1.0","name":"net-a","plugins":[{"type":"cheap"}]}'}
`)
	f.o = Options{WrapCNI: func(libcni.CNI) libcni.CNI {
		return libcni.NewCNIConfigWithCacheDir([]string{dir}, f.cache, cheapDelegate{})
	}, Log: slog.New(slog.DiscardHandler)}
	return f
}

// call runs one command as plexusd's handler does: with a netns unless
// gone (containerd's second DEL, once the sandbox is removed); valid is
// GC's list.
func (f *stateFixture) call(t testing.TB, command, id string, gone bool, valid []types.GCAttachment) {
	t.Helper()
	conf := map[string]any{"cniVersion": "1.1.0", "name": "plexus", "type": "plexus",
		"clusterNetwork": filepath.Join(f.dir, "default.conflist"), "cacheDir": f.cache,
		"manifests": filepath.Join(f.dir, "manifests")}
	if command == "GC" {
		conf["cni.dev/valid-attachments"] = valid
	}
	stdin, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CNI_COMMAND": command, "CNI_PATH": f.dir}
	if id != "" {
		env["CNI_CONTAINERID"], env["CNI_IFNAME"] = id, "eth0"
		env["CNI_ARGS"] = cmp.Or(f.args, "K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web;K8S_POD_UID=1234")
		if !gone {
			env["CNI_NETNS"] = filepath.Join(f.dir, "netns")
		}
	}
	if r := f.o.Handle(context.Background(), &daemon.Call{Env: env, Stdin: stdin}); r.Failed {
		t.Fatalf("%s %s failed: %s", command, id, r.Stdout)
	}
}

// files counts the files under cacheDir by top-level directory.
func (f *stateFixture) files(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := filepath.WalkDir(f.cache, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(f.cache, p)
		out[strings.SplitN(rel, string(filepath.Separator), 2)[0]]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStateOnDiskStaysBounded runs pod lifecycles through plexusd's
// handler (real libcni, records, locks and tombstones; a delegate that
// attaches nothing): most DELed twice as containerd does, every tenth
// never DELed, a GC every 200 keeping the last live ones. Afterwards
// cacheDir holds records, locks and libcni results for the live
// containers only and no tombstone, and never more than
// DefaultMaxTombstones tombstones: the files do not grow with the
// lifecycles. PLEXUS_STATE_LIFECYCLES raises the
// count (10,000 for the figures in docs/performance.md); 600 take 6-10 s
// on a loaded 2-core machine, 200 under the race detector about as long.
func TestStateOnDiskStaysBounded(t *testing.T) {
	lifecycles := 600
	if raceDetector {
		lifecycles = 200
	}
	if s := os.Getenv("PLEXUS_STATE_LIFECYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PLEXUS_STATE_LIFECYCLES=%q", s)
		}
		lifecycles = n
	}
	f := newStateFixture(t)
	const gcEvery, liveKept = 200, 3
	var live []string // ADDed and never DELed, newest last
	peak := map[string]int{}
	for i := range lifecycles {
		id := fmt.Sprintf("c%06d", i)
		f.call(t, "ADD", id, false, nil)
		if i%10 == 9 {
			live = append(live, id) // its DEL never comes
		} else {
			f.call(t, "DEL", id, false, nil)
			f.call(t, "DEL", id, true, nil)
		}
		if (i+1)%gcEvery == 0 || i == lifecycles-1 {
			// The runtime still runs the newest few; the others are gone.
			if len(live) > liveKept {
				live = live[len(live)-liveKept:]
			}
			var valid []types.GCAttachment
			for _, id := range live {
				valid = append(valid, types.GCAttachment{ContainerID: id, IfName: "eth0"})
			}
			for dir, n := range f.files(t) {
				peak[dir] = max(peak[dir], n)
			}
			f.call(t, "GC", "", false, valid)
		}
	}
	got := f.files(t)
	t.Logf("%d lifecycles: files under cacheDir %v; most before a GC %v", lifecycles, got, peak)
	want := map[string]int{
		"records": len(live),
		"locks":   len(live), // ADD keeps it; DEL and GC remove it
		// libcni's result and config cache: one per live attachment (the
		// default network and net-a).
		"results": 2 * len(live),
		// GC forgets the tombstones of containers the runtime no longer runs.
		"deleted": 0,
	}
	for dir, n := range want {
		if got[dir] != n {
			t.Errorf("%s: %d files, want %d", dir, got[dir], n)
		}
	}
	if peak["deleted"] > record.DefaultMaxTombstones {
		t.Errorf("deleted: %d tombstones before a GC, over the bound of %d", peak["deleted"], record.DefaultMaxTombstones)
	}
	for dir := range got {
		if _, ok := want[dir]; !ok {
			t.Errorf("unexpected files under cacheDir/%s: %d", dir, got[dir])
		}
	}
}

// TestDelRemovesStatusPastABrokenManifest: DEL reads no manifest, so one
// that stopped parsing after the ADD does not keep the pod's status file.
func TestDelRemovesStatusPastABrokenManifest(t *testing.T) {
	f := newStateFixture(t)
	status := filepath.Join(f.dir, "manifests", "status", "demo_web.json")
	f.call(t, "ADD", "c1", false, nil)
	if _, err := os.Stat(status); err != nil {
		t.Fatalf("no status file after ADD: %v", err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "manifests", "broken.yaml"), []byte("kind: ["), 0o600); err != nil {
		t.Fatal(err)
	}
	f.call(t, "DEL", "c1", false, nil)
	if _, err := os.Stat(status); !os.IsNotExist(err) {
		t.Errorf("status file after DEL: %v", err)
	}
}
