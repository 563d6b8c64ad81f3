package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/plexus-cni/plexus/cmd/internal/agent"
	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/config"
)

// Observed is what the last pass found.
func (in *Installer) Observed() nodestate.Install {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.seen
	out.Plugins, out.BinDirs = slices.Clone(out.Plugins), slices.Clone(out.BinDirs)
	return out
}

// observe records a pass and calls OnChange when it differs from the last.
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

// binDirs are where plexus and the runtime look for plugins.
func (in *Installer) binDirs() []string {
	var dirs []string
	if d, ok := in.o.Extra["binDir"].(string); ok && filepath.IsAbs(d) {
		dirs = append(dirs, d)
	}
	return append(dirs, in.o.BinDir)
}

// Agent is the thin node's agent; call it before Run.
func (in *Installer) Agent(version string) (*agent.Agent, error) {
	var c config.Config // the settings of the config the installer writes
	if raw, err := json.Marshal(in.o.Extra); err == nil {
		_ = json.Unmarshal(raw, &c) // keys of the wrong type fail the write
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
