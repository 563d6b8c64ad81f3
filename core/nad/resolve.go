package nad

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/netconf"
)

// Resolved is the CNI configuration a NAD stands for (s3.4.1).
type Resolved struct {
	// Config is a conf or conflist with a name (s3.4.2 applied).
	Config json.RawMessage
	// Source says where it came from: "spec.config" or a file path.
	Source string
}

// Resolve applies s3.4.1 to n: spec.config when present; else a conflist in
// confDir whose "name" matches the NAD's name; else a conf whose "name"
// matches; else an error naming the NAD.
func Resolve(n *NetworkAttachmentDefinition, confDir string) (*Resolved, error) {
	ref := n.Namespace + "/" + n.Name
	if err := cmp.Or(names.Label("NAD namespace", n.Namespace), names.Label("NAD name", n.Name)); err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s: %w", ref, err)
	}
	// Rule 1.
	if strings.TrimSpace(n.Spec.Config) != "" {
		cfg, err := FromSpecConfig(n.Name, []byte(n.Spec.Config))
		if err != nil {
			return nil, fmt.Errorf("NetworkAttachmentDefinition %s: spec.config: %w", ref, err)
		}
		return &Resolved{Config: cfg, Source: "spec.config"}, nil
	}
	// Rules 2 and 3.
	if confDir != "" {
		r, err := FromConfDir(confDir, n.Name)
		if err != nil {
			return nil, fmt.Errorf("NetworkAttachmentDefinition %s: %w", ref, err)
		}
		if r != nil {
			return r, nil
		}
	}
	// Rule 4.
	return nil, fmt.Errorf("NetworkAttachmentDefinition %s has no spec.config and no CNI config named %q in confDir %q (s3.4.1)", ref, n.Name, confDir)
}

// FromSpecConfig checks a spec.config and injects "name" when it is
// missing or empty (s3.4.2).
func FromSpecConfig(nadName string, raw []byte) (json.RawMessage, error) {
	c, err := netconf.Parse(raw)
	if err != nil {
		return nil, err
	}
	if c.Name() != "" {
		return json.RawMessage(raw), nil
	}
	if err := c.SetName(nadName); err != nil {
		return nil, err
	}
	return c.Bytes()
}

// FromConfDir finds an on-disk config whose "name" is name: conflists
// (rule 2), then confs (rule 3), in file name order; nil, nil for none.
func FromConfDir(dir, name string) (*Resolved, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading confDir: %w", err)
	}
	for _, exts := range [][]string{{".conflist"}, {".conf", ".json"}} {
		for _, e := range entries { // in name order
			if !e.Type().IsRegular() || !slices.Contains(exts, filepath.Ext(e.Name())) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			raw, err := os.ReadFile(path)
			if err != nil {
				continue // a broken file is skipped
			}
			if c, err := netconf.Parse(raw); err == nil && c.Name() == name {
				return &Resolved{Config: raw, Source: path}, nil
			}
		}
	}
	return nil, nil
}
