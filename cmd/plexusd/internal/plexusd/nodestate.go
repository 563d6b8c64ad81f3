package plexusd

import (
	"slices"
	"sync"

	"github.com/containernetworking/cni/libcni"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/cmd/internal/agent"
	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	"github.com/plexus-cni/plexus/extensions"
)

// newAgent builds the node agent on the Kubernetes source's API.
func (d *Daemon) newAgent(rc *rest.Config) error {
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "plexusd"
	px, err := versioned.NewForConfig(rc)
	if err != nil {
		return err
	}
	core, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	seen := &delegateTypes{}
	a, err := agent.New(agent.Options{Core: core, Options: nodestate.Options{
		Client: px, Node: d.o.NodeName, FieldManager: nodestate.ManagerPlexusd,
		Mode: nodestate.ModeThick, Version: d.o.Version, Log: d.o.Log,
		Install: func() nodestate.Install {
			var st nodestate.Install
			if d.installed != nil { // the config installer's last pass
				st = d.installed.Observed()
			}
			st.Plugins = append(st.Plugins, seen.list()...)
			return st
		},
		Extensions: d.nodeExtensions,
		Policy:     d.NodePolicy,
		Config:     d.conf,
	}})
	if err != nil {
		return err
	}
	seen.notify = a.Notify
	if d.installed != nil {
		d.installed.NotifyOnChange(a.Notify)
	}
	d.agent, d.delegates = a, seen
	return nil
}

// nodeExtensions reports the extension host's modules (never replaced).
func (d *Daemon) nodeExtensions() []extensions.ModuleState {
	if d.ext == nil {
		return nil
	}
	return d.ext.Modules()
}

// delegateTypes are the types of the delegates plexusd ran, for missing plugins.
type delegateTypes struct {
	mu     sync.Mutex
	seen   []string
	notify func()
}

func (s *delegateTypes) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// add records l's types; a new one notifies the reporter.
func (s *delegateTypes) add(l *libcni.NetworkConfigList) {
	if s == nil || l == nil {
		return
	}
	added := false
	s.mu.Lock()
	for _, p := range l.Plugins {
		if p == nil || p.Network == nil {
			continue
		}
		for _, t := range []string{p.Network.Type, p.Network.IPAM.Type} {
			if nodestate.IsPluginName(t) && !slices.Contains(s.seen, t) && len(s.seen) < nodestate.MaxPlugins {
				s.seen = append(s.seen, t)
				added = true
			}
		}
	}
	s.mu.Unlock()
	if added {
		s.notify()
	}
}

// wrapCNI counts delegate ADDs and records their types.
func (d *Daemon) wrapCNI(c libcni.CNI) libcni.CNI {
	return countingCNI{CNI: c, m: d.m, seen: d.delegates}
}
