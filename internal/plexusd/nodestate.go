package plexusd

import (
	"context"

	"k8s.io/client-go/dynamic"

	"github.com/plexus-cni/plexus/core/source/kube"
	"github.com/plexus-cni/plexus/internal/install"
	"github.com/plexus-cni/plexus/internal/nodestate"
)

// reportNode publishes this node's PlexusNode from what the config
// installer finds, until ctx ends. Only with the Kubernetes source: the
// manifests source has no API to write to.
func (d *Daemon) reportNode(ctx context.Context, in *install.Installer) error {
	if d.cache == nil {
		return nil
	}
	rc, err := kube.Config(d.conf.Kubeconfig)
	if err != nil {
		return err
	}
	rc.UserAgent = "plexusd"
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	r, err := nodestate.New(nodestate.Options{
		Client: dyn, Node: d.o.NodeName, FieldManager: nodestate.ManagerPlexusd,
		Mode: nodestate.ModeThick, Version: d.o.Version, Install: in.Observed, Log: d.o.Log,
	})
	if err != nil {
		return err
	}
	d.nodeState = r
	in.NotifyOnChange(r.Notify)
	go r.Run(ctx)
	return nil
}
