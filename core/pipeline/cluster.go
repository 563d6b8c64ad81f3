package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/source"
)

// clusterNetwork is the resolved cluster-wide default network (s6).
type clusterNetwork struct {
	name   string // status name (s5.3.1): the config's "name"
	config json.RawMessage
	nad    *source.NAD
	// podAnnotations: a plugin of the config declares the pod-annotations
	// capability.
	podAnnotations bool
}

// isPath tells a file or directory reference from a NAD name: NAD names
// (s3.3) never contain a slash or start with a dot.
func isPath(ref string) bool {
	return strings.ContainsRune(ref, '/') || strings.HasPrefix(ref, ".")
}

// loadClusterNetwork resolves clusterNetwork, or "delegates" inline.
func (p *Pipeline) loadClusterNetwork(ctx context.Context) (*clusterNetwork, error) {
	ref := p.Config.ClusterNetwork
	if ref == "" && len(p.Config.Delegates) > 0 {
		return p.clusterFromConfig(p.Config.Delegates[0], p.Config.ConfDir, `"delegates[0]"`, nil)
	}
	if isPath(ref) {
		raw, path, err := readClusterFile(ref)
		if err != nil {
			return nil, err
		}
		return p.clusterFromConfig(raw, filepath.Dir(path), path, nil)
	}
	if p.Source == nil {
		return nil, fmt.Errorf("clusterNetwork %q names a NAD, which needs a pod source (kubeconfig or manifests)", ref)
	}
	if err := names.Label("clusterNetwork NAD name", ref); err != nil {
		return nil, err
	}
	n, err := p.Source.NAD(ctx, p.Config.SystemNamespace, ref)
	if err != nil {
		return nil, fmt.Errorf("clusterNetwork: %w", err)
	}
	r, err := nad.Resolve(n, p.Config.ConfDir)
	if err != nil {
		return nil, fmt.Errorf("clusterNetwork: %w", err)
	}
	return p.clusterFromConfig(r.Config, p.Config.ConfDir, r.Source, n)
}

// clusterFromConfig is the default network of config raw with dir's
// auxiliary chain; where names it in errors, n is its NAD, if any.
func (p *Pipeline) clusterFromConfig(raw []byte, dir, where string, n *source.NAD) (*clusterNetwork, error) {
	raw, err := p.withAuxiliaryChain(raw, dir)
	if err != nil {
		return nil, err
	}
	c, err := netconf.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("clusterNetwork %s: %w", where, err)
	}
	if c.Name() == "" {
		return nil, fmt.Errorf("clusterNetwork %s: the CNI config has no \"name\"", where)
	}
	if isPlexus(c) {
		// plexus delegating to itself would recurse until the runtime gives up.
		return nil, fmt.Errorf("clusterNetwork %s is plexus's own config, not the cluster-wide default network's", where)
	}
	return &clusterNetwork{name: c.Name(), config: raw, nad: n, podAnnotations: c.HasCapability(PodAnnotationsCapability)}, nil
}

// readClusterFile reads a conf or conflist file, or the first config by
// name in a directory other than plexus's own.
func readClusterFile(path string) ([]byte, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("clusterNetwork: %w", err)
	}
	if !fi.IsDir() {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("clusterNetwork: %w", err)
		}
		if raw, err = withSubdirChain(raw, filepath.Dir(path)); err != nil {
			return nil, "", fmt.Errorf("clusterNetwork %s: %w", path, err)
		}
		return raw, path, nil
	}
	entries, err := os.ReadDir(path) // sorted by name: the first config wins
	if err != nil {
		return nil, "", fmt.Errorf("clusterNetwork: %w", err)
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if !e.Type().IsRegular() || (ext != ".conf" && ext != ".conflist" && ext != ".json") {
			continue
		}
		full := filepath.Join(path, e.Name())
		raw, err := os.ReadFile(full)
		if err != nil {
			continue
		}
		if raw, err = withSubdirChain(raw, path); err != nil {
			continue
		}
		c, err := netconf.Parse(raw)
		if err != nil || isPlexus(c) {
			continue
		}
		return raw, full, nil
	}
	return nil, "", fmt.Errorf("clusterNetwork: no CNI config in directory %s", path)
}

func isPlexus(c *netconf.Conf) bool {
	return slices.ContainsFunc(c.PluginTypes(), config.IsPlexusPlugin)
}
