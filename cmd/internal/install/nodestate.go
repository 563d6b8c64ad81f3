package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"

	"github.com/plexus-cni/plexus/cmd/internal/agent"
	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/config"
)

// Observed is what the last pass found: plexus's config, the default
// network, and the plugin types both name with the bin dirs they are
// looked up in.
func (in *Installer) Observed() nodestate.Install {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.seen
	out.Plugins = append([]string(nil), out.Plugins...)
	out.BinDirs = append([]string(nil), out.BinDirs...)
	return out
}

// observe records a pass and calls OnChange when it differs from the
// last: def and raw are the default network's config file and bytes ("",
// nil when there is none).
func (in *Installer) observe(ours, def string, raw []byte) {
	cur := nodestate.Install{ConfigPath: ours, BinDirs: in.binDirs()}
	if fi, err := os.Stat(ours); err == nil && fi.Mode().IsRegular() {
		cur.ConfigInstalled = true
		cur.Plugins = append(cur.Plugins, in.pluginType())
	}
	if def != "" {
		cur.DefaultNetworkFile = def
		if c, err := parseConf(raw); err == nil {
			cur.DefaultNetwork = c.Name
			cur.Plugins = append(cur.Plugins, c.types()...)
		}
	}
	in.mu.Lock()
	changed := !reflect.DeepEqual(cur, in.seen)
	in.seen = cur
	in.mu.Unlock()
	if changed && in.o.OnChange != nil {
		in.o.OnChange()
	}
}

// binDirs are where plexus (binDir) and the runtime (the CNI bin dir)
// look for plugins.
func (in *Installer) binDirs() []string {
	var dirs []string
	if d, ok := in.o.Extra["binDir"].(string); ok && filepath.IsAbs(d) {
		dirs = append(dirs, d)
	}
	return append(dirs, in.o.BinDir)
}

// Agent is the thin node's agent (cmd/internal/agent), authenticated as
// the installer's API clients are: it reports what the installer puts in
// place and follows PolicyObject once Run has put its revision in force.
// Call it before Run.
func (in *Installer) Agent(version string) (*agent.Agent, error) {
	// The settings of the config the installer writes: the keys it was
	// given.
	var c config.Config
	if raw, err := json.Marshal(in.o.Extra); err == nil {
		// Keys of the wrong type were refused when the config was written.
		_ = json.Unmarshal(raw, &c)
	}
	a, err := agent.New(agent.Options{Core: in.o.Client, Options: nodestate.Options{
		Client: in.o.Plexus, Node: in.o.NodeName, FieldManager: nodestate.ManagerInstaller,
		Mode: nodestate.ModeThin, Version: version, Install: in.Observed, Log: in.o.Log,
		Policy: in.NodePolicy, Extensions: in.NodeExtensions, Config: &c,
	}})
	if err != nil {
		return nil, err
	}
	in.agent = a
	in.NotifyOnChange(a.Notify)
	return a, nil
}

// NotifyOnChange sets OnChange; call it before Run.
func (in *Installer) NotifyOnChange(f func()) { in.o.OnChange = f }
