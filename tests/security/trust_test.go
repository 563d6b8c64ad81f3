package security

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestNADAuthorControlsDelegateConfig documents a trust boundary rather
// than a defence: beyond plugin types and names, plexus passes a NAD's
// config to the delegate as written, so whoever may write NADs decides,
// for example, where host-local keeps its leases. NAD write access must be
// granted like node access (docs/security.md).
func TestNADAuthorControlsDelegateConfig(t *testing.T) {
	h := harness.New(t)
	chosen := filepath.Join(h.Dir, "author-chosen")
	h.NAD("demo", "net-a", `{"cniVersion":"1.0.0","name":"net-a","type":"bridge","bridge":"`+h.Bridge()+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+chosen+`"}}`)
	h.Pod("demo", "web", "net-a")
	c := h.Container("demo", "web")
	before := harness.HostVeths(t)
	h.MustPlugin(c, "ADD", "")
	if _, err := os.Stat(filepath.Join(chosen, "net-a")); err != nil {
		t.Errorf("host-local did not use the NAD's dataDir: %v", err)
	}
	h.DelDetached(c, before, "")
}

// TestStateIsPrivate: records, locks, libcni's results and the log are
// for root only: records and results hold every attachment's delegate
// config, which may carry credentials.
func TestStateIsPrivate(t *testing.T) {
	h := harness.New(t)
	h.BridgeNAD("demo", "net-a")
	h.Pod("demo", "web", "net-a")
	c := h.Container("demo", "web")
	h.MustPlugin(c, "ADD", "")
	for _, p := range []string{
		filepath.Join(h.CacheDir, "records"),
		filepath.Join(h.CacheDir, "records", "direct-web.json"),
		filepath.Join(h.CacheDir, "locks"),
		filepath.Join(h.CacheDir, "results"),
		filepath.Join(h.Dir, "plexus.log"),
	} {
		fi, err := os.Stat(p)
		harness.Must(t, err)
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: group or others can access it", p, fi.Mode().Perm())
		}
	}
	h.MustPlugin(c, "DEL", "")
}
