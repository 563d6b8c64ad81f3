package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/netconf"
)

// The keys in this file come from Multus's configuration, so that a
// cluster moving to plexus keeps its settings (docs/migrating.md).

// DefaultReadinessTimeout is how long an ADD waits for
// readinessindicatorfile by default: well inside the runtime's own
// timeout, so the failure is plexus's clear one.
const DefaultReadinessTimeout = 10 * time.Second

// LogOptions rotate logFile by size (the "logOptions" key).
type LogOptions struct {
	MaxSize    int  `json:"maxSize,omitempty"`    // megabytes
	MaxBackups int  `json:"maxBackups,omitempty"` // 0: all
	MaxAge     int  `json:"maxAge,omitempty"`     // days, 0: no limit
	Compress   bool `json:"compress,omitempty"`   // gzip rotated files
}

// Limits that catch a unit mistake (bytes for megabytes).
const (
	maxLogSizeMB  = 1 << 20 // 1 TiB
	maxLogBackups = 10000
	maxLogAgeDays = 36500
)

// ReadinessWait is readinessTimeout, or its default.
func (c *Config) ReadinessWait() time.Duration {
	return c.ReadinessTimeout.Or(DefaultReadinessTimeout)
}

// IsSystemNamespace reports whether ns is exempt from defaultNetworks.
func (c *Config) IsSystemNamespace(ns string) bool { return slices.Contains(c.SystemNamespaces, ns) }

func (c *Config) validateCompat() error {
	if !c.MultusCompat() {
		if k := c.multusKeySet(); k != "" {
			return fmt.Errorf("%q comes from Multus and needs \"compat\": %q (it is %q, or unset with strictSelection)", k, CompatMultus, CompatOff)
		}
	}
	for i, ref := range c.DefaultNetworks {
		if _, _, err := names.NADRef("NAD reference", ref); err != nil {
			return fmt.Errorf(`"defaultNetworks[%d]": %w`, i, err)
		}
	}
	for i, ns := range c.SystemNamespaces {
		if err := names.Label("namespace", ns); err != nil {
			return fmt.Errorf(`"systemNamespaces[%d]": %w`, i, err)
		}
	}
	if err := checkAbsPath("readinessindicatorfile", c.ReadinessIndicatorFile); err != nil {
		return err
	}
	if c.ReadinessTimeout != 0 && c.ReadinessIndicatorFile == "" {
		return fmt.Errorf(`"readinessTimeout" is set but "readinessindicatorfile" is not`)
	}
	if err := c.validateDelegates(); err != nil {
		return err
	}
	if c.AuxiliaryCNIChainName != "" {
		if err := names.Network(c.AuxiliaryCNIChainName); err != nil {
			return fmt.Errorf(`"auxiliaryCNIChainName": %w`, err)
		}
	}
	return c.validateLogOptions()
}

// checkAbsPath: an admin's path, absolute and clean, as plexus opens it.
func checkAbsPath(key, p string) error {
	switch {
	case p == "":
		return nil
	case !filepath.IsAbs(p):
		return fmt.Errorf("%q: %q must be an absolute path", key, p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q: %q is not a clean path (write %q)", key, p, filepath.Clean(p))
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q: the path holds a NUL byte", key)
	}
	return nil
}

// validateDelegates checks the inline default network. Multus attached
// delegates after the first as further networks of every pod; plexus
// refuses them rather than drop them silently: defaultNetworks says that.
func (c *Config) validateDelegates() error {
	if c.Delegates == nil {
		return nil
	}
	switch {
	case len(c.Delegates) == 0:
		return fmt.Errorf(`"delegates" is empty: it needs the default network's CNI config as its first element`)
	case c.ClusterNetwork != "":
		return fmt.Errorf(`"clusterNetwork" and "delegates" both name the default network: keep one`)
	case len(c.Delegates) > 1:
		return fmt.Errorf(`"delegates" has %d elements: plexus uses only the first, as the default network; make the others NADs and list them in "defaultNetworks"`, len(c.Delegates))
	}
	d, err := netconf.Parse(c.Delegates[0])
	if err != nil {
		return fmt.Errorf(`"delegates[0]": %w`, err)
	}
	if d.Name() == "" {
		return fmt.Errorf(`"delegates[0]": the CNI config has no "name"`)
	}
	if i := slices.IndexFunc(d.PluginTypes(), IsPlexusPlugin); i >= 0 {
		return fmt.Errorf(`"delegates[0]" is plexus itself (type %q), not the default network`, d.PluginTypes()[i])
	}
	return nil
}

func (c *Config) validateLogOptions() error {
	o := c.LogOptions
	if o == nil {
		return nil
	}
	if c.LogFile == "" {
		return fmt.Errorf(`"logOptions" is set but "logFile" is not: only a log file is rotated`)
	}
	for _, f := range []struct {
		key      string
		val, max int
	}{{"maxSize", o.MaxSize, maxLogSizeMB}, {"maxBackups", o.MaxBackups, maxLogBackups}, {"maxAge", o.MaxAge, maxLogAgeDays}} {
		if f.val < 0 || f.val > f.max {
			return fmt.Errorf(`"logOptions.%s": %d is outside [0, %d]`, f.key, f.val, f.max)
		}
	}
	return nil
}

// decodeLogOptions refuses unknown keys in logOptions.
func decodeLogOptions(keys map[string]json.RawMessage) error {
	raw, ok := keys["logOptions"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf(`"logOptions": want an object: %w`, err)
	}
	for k := range m {
		if !slices.Contains([]string{"maxSize", "maxBackups", "maxAge", "compress"}, k) {
			return fmt.Errorf(`"logOptions": unknown key %q (keys: maxSize, maxBackups, maxAge, compress)`, k)
		}
	}
	return nil
}

// multusKeySet names a Multus key the config sets, or "". logOptions is
// plexus's own; systemNamespaces only qualifies defaultNetworks.
func (c *Config) multusKeySet() string {
	switch {
	case len(c.DefaultNetworks) > 0:
		return "defaultNetworks"
	case c.ReadinessIndicatorFile != "":
		return "readinessindicatorfile"
	case len(c.Delegates) > 0:
		return "delegates"
	case c.AuxiliaryCNIChainName != "":
		return "auxiliaryCNIChainName"
	}
	return ""
}
