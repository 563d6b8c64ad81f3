package plexusd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/plexus-cni/plexus/core/config"
)

// distributionsDoc is where an admin finds each distribution's paths.
const distributionsDoc = "docs/install.md#distributions"

// nodePaths puts the node's paths given as flags into the config.
func (o Options) nodePaths(conf *config.Config) {
	if o.ConfDirSet {
		conf.ConfDir = o.DefaultConfDir
	}
	if o.BinDirSet {
		conf.BinDir = o.BinDir
	}
	if o.CRISocket != "" {
		conf.CRISocket = o.CRISocket
	}
}

// checkRuntimeDirs refuses to start when plexus's config or binaries
// would go anywhere but where the runtime reads them: every pod would
// silently get only the default network. A runtime that cannot tell
// leaves the paths unchecked, with a warning.
func (d *Daemon) checkRuntimeDirs(ctx context.Context) error {
	if d.conf.CRISocket == "" || !d.o.InstallConfig {
		return nil
	}
	c, err := d.criClient()
	if err != nil {
		return err
	}
	dirs, err := c.CNIDirs(ctx)
	if err != nil {
		d.o.Log.Warn("could not ask the runtime for its CNI directories: --cni-conf-dir and --cni-bin-dir are not checked", "err", err)
		return nil
	}
	d.o.Log.Info("the runtime's CNI directories", "runtime", dirs.Runtime, "confDir", dirs.ConfDir, "binDirs", dirs.BinDirs)
	var errs []error
	if !d.sameDir(d.o.ConfDir, dirs.ConfDir) {
		errs = append(errs, fmt.Errorf("the runtime (%s at %s) reads CNI configs from %s, not from --cni-conf-dir %s, so it would never call plexus", dirs.Runtime, d.conf.CRISocket, dirs.ConfDir, d.o.ConfDir))
	}
	if len(d.o.Binaries) > 0 && !slices.ContainsFunc(dirs.BinDirs, func(b string) bool { return d.sameDir(d.o.BinDir, b) }) {
		errs = append(errs, fmt.Errorf("the runtime (%s at %s) finds CNI plugins in %v, not in --cni-bin-dir %s, where plexus's binaries would go", dirs.Runtime, d.conf.CRISocket, dirs.BinDirs, d.o.BinDir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: set this node's paths for its distribution (%s)", err, distributionsDoc)
	}
	return nil
}

// sameDir: ours (as plexusd sees it) and theirs (a host path) are one
// directory, by name or, through the host's root, by identity (a link
// such as a snap's "current").
func (d *Daemon) sameDir(ours, theirs string) bool {
	if filepath.Clean(ours) == theirs {
		return true
	}
	if d.o.DelegateRoot == "" {
		return false
	}
	a, err := os.Stat(ours)
	if err != nil {
		return false
	}
	b, err := os.Stat(filepath.Join(d.o.DelegateRoot, theirs))
	return err == nil && os.SameFile(a, b)
}
