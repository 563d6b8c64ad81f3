package plexusd

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

func mkfiles(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUninstallLeavesAFreshNode: with --uninstall, plexusd removes the
// policy revisions (a reinstall enforces the baseline), the compilation
// cache and, when no pod is attached, its records; with a record left it
// keeps them and says so.
func TestUninstallLeavesAFreshNode(t *testing.T) {
	for _, tc := range []struct {
		name        string
		attached    bool
		wantCacheOK bool // the cache dir is gone
	}{
		{"no pod attached", false, true},
		{"a pod still attached", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cache := filepath.Join(root, "var/lib/cni/plexus")
			state := filepath.Join(cache, "policy")
			mkfiles(t, filepath.Join(state, ".state.json"), filepath.Join(state, ".revisions/3-abc/p.rego"),
				filepath.Join(cache, "extensions/vlan.cache"), filepath.Join(cache, "results/r"), filepath.Join(cache, "locks/l"))
			if err := os.Symlink(".revisions/3-abc", filepath.Join(state, "active")); err != nil {
				t.Fatal(err)
			}
			if tc.attached {
				mkfiles(t, filepath.Join(cache, "records/c1"))
			}
			sock := filepath.Join(root, "run/plexus/plexusd.sock")
			if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
				t.Fatal(err)
			}
			d := &Daemon{o: Options{Socket: sock}, conf: &config.Config{CallSettings: config.CallSettings{CacheDir: cache}},
				policy: &reloadingPolicy{cfg: policies.Config{Object: &policies.ObjectConfig{Name: "cluster", StateDir: state}}, sync: &revision.Syncer{}}}
			removed, kept, err := d.uninstallState()
			if err != nil {
				t.Fatal(err)
			}
			for _, gone := range []string{filepath.Join(state, "active"), filepath.Join(state, ".revisions"), filepath.Join(cache, "extensions"), filepath.Dir(sock)} {
				if _, err := os.Lstat(gone); !os.IsNotExist(err) {
					t.Errorf("%s is still there (%v)", gone, err)
				}
			}
			if !slices.Contains(removed, state) {
				t.Errorf("removed %v, want the policy state %s", removed, state)
			}
			_, err = os.Stat(cache)
			if gone := os.IsNotExist(err); gone != tc.wantCacheOK {
				t.Errorf("cache dir gone: %v, want %v (kept %v)", gone, tc.wantCacheOK, kept)
			}
			if tc.attached && (len(kept) != 1 || !strings.Contains(kept[0], "1 attachment record(s)")) {
				t.Errorf("kept %v, want the cache dir named with its record", kept)
			}
		})
	}
}
