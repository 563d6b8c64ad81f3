package plexusd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/plexus-cni/plexus/policies/revision"
)

// uninstallState removes, with --uninstall, what plexusd keeps on the node
// besides the CNI config and binaries, so a later install starts fresh:
// the policy revisions, the extension cache and the socket's directory;
// records, results, locks and tombstones too unless a record is left (its
// pod's DEL needs them). It returns what it removed and what it kept.
func (d *Daemon) uninstallState() (removed, kept []string, err error) {
	var errs []error
	remove := func(p string) {
		if rerr := os.RemoveAll(p); rerr != nil {
			errs = append(errs, rerr)
			return
		}
		removed = append(removed, p)
	}
	if d.policy != nil && d.policy.sync != nil {
		dir := d.policy.cfg.Object.StateDir
		if rerr := revision.Remove(dir); rerr != nil {
			errs = append(errs, fmt.Errorf("policy state %s: %w", dir, rerr))
		} else {
			removed = append(removed, dir)
			_ = os.Remove(dir) // only if empty
		}
	}
	if c := d.conf.CacheDir; c != "" {
		remove(filepath.Join(c, "extensions"))
		records := filepath.Join(c, "records")
		if left, _ := os.ReadDir(records); len(left) > 0 {
			kept = append(kept, fmt.Sprintf("%s (%d attachment record(s) of pods still attached)", c, len(left)))
		} else {
			for _, sub := range []string{"records", "results", "locks", "deleted"} {
				remove(filepath.Join(c, sub))
			}
			_ = os.Remove(c) // only if empty
		}
	}
	if d.o.Socket != "" {
		_ = os.Remove(filepath.Dir(d.o.Socket)) // only if empty: a mount point stays
	}
	return removed, kept, errors.Join(errs...)
}
