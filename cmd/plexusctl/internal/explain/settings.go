package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/config"
)

// nodeConfig is the config the plan is made with: the --config file, the
// node's PlexusNode's settings, or plexus's defaults with a warning.
func (b *builder) nodeConfig(ctx context.Context) (*config.Config, error) {
	if path := b.opts.ConfigFile; path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading --config: %w", err)
		}
		c, err := config.ParseBase(raw)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", path, err)
		}
		b.r.Settings = Settings{From: "config " + path, NodeSettings: *nodestate.Settings(c, "")}
		// An auxiliary chain is a directory on the node, which Plan does
		// not leave to the node as it does the rest.
		c.AuxiliaryCNIChainName = ""
		return c, nil
	}
	node, why := b.planNode(ctx)
	if node != nil {
		c, err := configOf(node.Status.Settings)
		if err != nil {
			return nil, fmt.Errorf("PlexusNode %s: %w", node.Name, err)
		}
		b.r.Settings = Settings{From: "PlexusNode " + node.Name, NodeSettings: *node.Status.Settings}
		return c, nil
	}
	c, err := configOf(&plexusapi.NodeSettings{})
	if err != nil {
		return nil, err
	}
	b.r.Settings = Settings{From: "defaults", NodeSettings: *nodestate.Settings(c, "")}
	b.warn("%s: the plan uses plexus's defaults: %s", why, describeSettings(&b.r.Settings.NodeSettings))
	return c, nil
}

// planNode reads the PlexusNode of --node, else of the pod's node, with
// settings; or says why there is none.
func (b *builder) planNode(ctx context.Context) (*plexusapi.PlexusNode, string) {
	name := cmp.Or(b.opts.Node, b.pod.NodeName)
	switch {
	case name == "":
		return nil, "no node (--node, or the pod's spec.nodeName) and no --config"
	case b.opts.Cluster == nil:
		return nil, fmt.Sprintf("no kubeconfig to read PlexusNode %s, and no --config", name)
	}
	pn, err := b.opts.Cluster.plexusNode(ctx, name)
	switch {
	case err != nil:
		return nil, err.Error()
	case pn == nil:
		return nil, fmt.Sprintf("no PlexusNode %s", name)
	case pn.Status.Settings == nil:
		return nil, fmt.Sprintf("PlexusNode %s reports no settings (an older plexus)", name)
	}
	return pn, ""
}

// configOf is a config with the node's settings: their names are the
// config's keys, and what they leave out takes the defaults.
func configOf(s *plexusapi.NodeSettings) (*config.Config, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	c, err := config.ParseBase(raw)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return c, nil
}

func describeSettings(s *plexusapi.NodeSettings) string {
	none := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf("compat %s, strictSelection %v, systemNamespace %s, defaultNetworks %s, systemNamespaces %s",
		s.Compat, s.StrictSelection, s.SystemNamespace, none(s.DefaultNetworks), none(s.SystemNamespaces))
}
