package cniplugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"golang.org/x/sys/unix"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/core/config"
)

// plexusd's handler refuses a call without a command it runs; the shim's
// skel checked the rest of the environment.
func TestHandleRefusesAnUnknownCommand(t *testing.T) {
	for _, env := range []map[string]string{{}, {"CNI_COMMAND": "VERSION"}, {"CNI_COMMAND": "FROB"}} {
		r := Options{}.Handle(context.Background(), &daemon.Call{Env: env})
		var e types.Error
		if !r.Failed || json.Unmarshal(r.Stdout, &e) != nil || e.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(e.Msg, "CNI_COMMAND") {
			t.Errorf("%v: reply %+v (%s)", env, r, r.Stdout)
		}
	}
}

// An ADD or DEL in plexusd's own network namespace is refused before
// anything runs, with CNI_NETNS resolved as the delegates resolve it: under
// the delegate root, where a path the runtime made (a bind mount of the
// namespace) is, though plexusd's own mounts lack it.
func TestHandleRefusesItsOwnNetworkNamespace(t *testing.T) {
	conf := []byte(`{"cniVersion":"1.0.0","name":"plexus","type":"plexus-shim","clusterNetwork":"/x"}`)
	tests := []struct{ name, root, netns string }{
		{"by /proc", "", "/proc/self/ns/net"},
	}
	if os.Geteuid() == 0 {
		tests = append(tests, struct{ name, root, netns string }{"bind-mounted under the delegate root", ownNetNSUnderRoot(t, "/run/netns/own"), "/run/netns/own"})
	}
	for _, tt := range tests {
		for _, cmd := range []string{"ADD", "DEL"} {
			env := map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0", "CNI_NETNS": tt.netns}
			o := Options{DelegateRoot: tt.root, Own: &config.Config{CallSettings: config.CallSettings{CacheDir: t.TempDir()}}}
			r := o.Handle(context.Background(), &daemon.Call{Env: env, Stdin: conf})
			var e types.Error
			if !r.Failed || json.Unmarshal(r.Stdout, &e) != nil || e.Code != types.ErrInvalidNetNS || !strings.Contains(e.Msg, "should not be the same") {
				t.Errorf("%s, %s: reply %s", tt.name, cmd, r.Stdout)
			}
		}
	}
}

// ownNetNSUnderRoot is a host root holding this process's network
// namespace bind-mounted at p, as a runtime mounts a pod's.
func ownNetNSUnderRoot(t *testing.T, p string) string {
	t.Helper()
	root := t.TempDir()
	target := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/proc/self/ns/net", target, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting this process's network namespace: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	return root
}

func TestHandleBadConfigIsACNIError(t *testing.T) {
	r := Options{}.Handle(context.Background(), &daemon.Call{
		Env:   map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c", "CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin"},
		Stdin: []byte(`{"cniVersion":"1.0.0","name":"plexus","type":"plexus","clusterNetwork":"/x","bogus":true}`),
	})
	var e types.Error
	if !r.Failed || json.Unmarshal(r.Stdout, &e) != nil || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, `"bogus"`) {
		t.Errorf("reply %s", r.Stdout)
	}
}

// TestHandleUsesPlexusdsOwnDirectories: a forwarded call's config cannot
// point plexusd (root) at other delegates or other state: binDir,
// cacheDir and confDir come from plexusd's own config.
func TestHandleUsesPlexusdsOwnDirectories(t *testing.T) {
	callers, own := t.TempDir(), t.TempDir()
	conf, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "plexus", "type": "plexus-shim", "clusterNetwork": "/x",
		"cacheDir": filepath.Join(callers, "cache"), "binDir": filepath.Join(callers, "bin"), "confDir": filepath.Join(callers, "conf")})
	o := Options{Own: &config.Config{CallSettings: config.CallSettings{CacheDir: filepath.Join(own, "cache"), BinDir: filepath.Join(own, "bin")}}}
	r := o.Handle(context.Background(), &daemon.Call{
		Env:   map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0", "CNI_PATH": "/nonexistent"},
		Stdin: conf,
	})
	if r.Failed {
		t.Fatalf("DEL failed: %s", r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(own, "cache", "locks")); err != nil {
		t.Errorf("plexusd's own cacheDir was not used: %v", err)
	}
	if entries, _ := os.ReadDir(callers); len(entries) != 0 {
		t.Errorf("the caller's directories were used: %v", entries)
	}
}
