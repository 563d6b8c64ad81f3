// Package config reads plexus's own CNI network configuration: the config
// kubelet's runtime passes to the plexus plugin.
package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/core/config/daemonconf"
	"github.com/plexus-cni/plexus/core/devinfo"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/selection"
)

// Defaults for keys left out.
const (
	DefaultSystemNamespace = "kube-system"
	DefaultCacheDir        = "/var/lib/cni/plexus"
	DefaultConfDir         = "/etc/cni/net.d"
	// DefaultPodResourcesSocket is kubelet's pod-resources gRPC socket.
	DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	// DefaultDeviceInfoDir is the device-info spec v1.1's root (s4.1, s4.2).
	DefaultDeviceInfoDir = devinfo.DefaultDir
)

// Config is plexus's network configuration.
type Config struct {
	CNIVersion   string          `json:"cniVersion"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	// RuntimeConfig goes to the default network's delegates.
	RuntimeConfig map[string]any `json:"runtimeConfig,omitempty"`
	// ValidAttachments is what a runtime's GC keeps (CNI spec, GC).
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`

	// ClusterNetwork is the cluster-wide default network (s6): a conf or
	// conflist file, a directory (its first config by name), or the name
	// of a NAD in SystemNamespace.
	ClusterNetwork  string `json:"clusterNetwork"`
	SystemNamespace string `json:"systemNamespace,omitempty"`
	// CallSettings are the keys that shape each call, at the top level.
	CallSettings
	// Kubeconfig selects the Kubernetes source ("" with Manifests unset
	// means in-cluster configuration).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// NodeName is the node plexus runs on, the source of its events
	// (admission binds them to the credential's node); unset: the pod's.
	NodeName string `json:"nodeName,omitempty"`
	// Manifests selects the standalone source: a directory of Pod and
	// NetworkAttachmentDefinition YAML documents.
	Manifests string `json:"manifests,omitempty"`
	// APITimeout bounds one Kubernetes API request and APIBudget one call
	// with its retries; unset means the source's defaults.
	APITimeout Duration `json:"apiTimeout,omitempty"`
	APIBudget  Duration `json:"apiBudget,omitempty"`
	// DelegateTimeout bounds each delegate ADD, DEL and CHECK; one still
	// running then is killed and the ADD undone (s7.2).
	DelegateTimeout Duration `json:"delegateTimeout,omitempty"`
	// PodResourcesSocket is kubelet's pod-resources API, asked which
	// devices a pod got for a NAD with k8s.v1.cni.cncf.io/resourceName.
	PodResourcesSocket string `json:"podResourcesSocket,omitempty"`
	// DeviceInfoDir is the device-info spec's root (dp/ and cni/).
	DeviceInfoDir string `json:"deviceInfoDir,omitempty"`
	// Policy and Extensions configure the optional stages, which core
	// does not build.
	Policy     json.RawMessage `json:"policy,omitempty"`
	Extensions json.RawMessage `json:"extensions,omitempty"`

	// Delegates is an inline default network, its first element, used
	// when clusterNetwork is unset.
	Delegates []json.RawMessage `json:"delegates,omitempty"`

	// DaemonSocket and DaemonWait (CallSettings) switch the plugin to
	// thick mode's forwarder (daemonconf.Parse).
	DaemonSocket string `json:"daemonSocket,omitempty"`

	// DynamicAttachments makes plexusd follow changes of a running pod's
	// selection annotation (spec open question 2).
	DynamicAttachments bool `json:"dynamicAttachments,omitempty"`
	// CRISocket is the runtime's CRI socket, where plexusd finds a running
	// sandbox's network namespace ("": containerd's).
	CRISocket string `json:"criSocket,omitempty"`
	// GCInterval and GCGrace shape plexusd's collection of stale records
	// (on with criSocket), for runtimes that never send CNI GC: every
	// GCInterval, records of containers the runtime no longer lists and
	// not written for GCGrace are detached.
	GCInterval Duration `json:"gcInterval,omitempty"`
	GCGrace    Duration `json:"gcGrace,omitempty"`
}

// CallSettings are the keys that shape a CNI call beyond its network. In
// thick mode the shim runs the full plugin with its own config for a DEL
// while plexusd is down, so plexusd writes its CallSettings into the
// shim's config: this type is the list of keys it forwards.
type CallSettings struct {
	// ConfDir holds on-disk networks for s3.4.1 rules 2-3.
	ConfDir string `json:"confDir,omitempty"`
	// CacheDir holds attachment records, locks and libcni's result cache.
	CacheDir string `json:"cacheDir,omitempty"`
	BinDir   string `json:"binDir,omitempty"` // searched before CNI_PATH
	LogLevel string `json:"logLevel,omitempty"`
	LogFile  string `json:"logFile,omitempty"`
	// StrictSelection fails ADD on an invalid selection annotation instead
	// of attaching the default network only.
	StrictSelection bool `json:"strictSelection,omitempty"`
	// Compat is CompatMultus (accept what was written for Multus, beyond
	// the spec) or CompatOff. Unset: multus, or off with StrictSelection.
	Compat string `json:"compat,omitempty"`
	// DefaultNetworks are NADs ("name" in SystemNamespace, or
	// "namespace/name") every pod outside SystemNamespaces gets after its
	// default network.
	DefaultNetworks  []string `json:"defaultNetworks,omitempty"`
	SystemNamespaces []string `json:"systemNamespaces,omitempty"`
	// ReadinessIndicatorFile: ADD waits up to ReadinessTimeout for this
	// file before delegating.
	ReadinessIndicatorFile string   `json:"readinessindicatorfile,omitempty"`
	ReadinessTimeout       Duration `json:"readinessTimeout,omitempty"`
	// AuxiliaryCNIChainName names a libcni subdirectory chain appended to
	// the default network's plugins.
	AuxiliaryCNIChainName string      `json:"auxiliaryCNIChainName,omitempty"`
	LogOptions            *LogOptions `json:"logOptions,omitempty"`
	DaemonWait            Duration    `json:"daemonWait,omitempty"`
}

// The defaults of gcInterval and gcGrace. The grace covers the
// milliseconds between an ADD's last record write and the runtime listing
// its sandbox; a running ADD holds the lock the choice is made under.
const (
	DefaultGCInterval = 10 * time.Minute
	DefaultGCGrace    = 2 * time.Minute
)

// Daemon is the config's thick-mode keys.
func (c *Config) Daemon() *daemonconf.Daemon {
	return &daemonconf.Daemon{DaemonSocket: c.DaemonSocket, DaemonWait: c.DaemonWait}
}

// plexusKeys are the keys Config defines; cniKeys are those the CNI spec
// lets a runtime or libcni put in any plugin's config.
var (
	plexusKeys = []string{"clusterNetwork", "systemNamespace", "confDir", "cacheDir", "binDir", "kubeconfig", "nodeName", "manifests", "apiTimeout", "apiBudget", "delegateTimeout", "logLevel", "logFile", "strictSelection", "compat", "policy", "extensions", "daemonSocket", "daemonWait", "dynamicAttachments", "criSocket", "gcInterval", "gcGrace", "defaultNetworks", "systemNamespaces", "readinessindicatorfile", "readinessTimeout", "delegates", "auxiliaryCNIChainName", "logOptions", "podResourcesSocket", "deviceInfoDir"}
	cniKeys    = []string{"cniVersion", "cniVersions", "name", "type", "capabilities", "runtimeConfig", "args", "prevResult", "ipMasq", "ipam", "dns", "disableCheck", "disableGC", "loadOnlyInlinedPlugins", "cni.dev/valid-attachments", "cni.dev/attachments"}
)

// Parse decodes and checks the config from stdin.
func Parse(stdin []byte) (*Config, error) {
	c, err := ParseBase(stdin)
	if err != nil {
		return nil, err
	}
	if c.ClusterNetwork == "" && len(c.Delegates) == 0 {
		return nil, fmt.Errorf(`plexus config: "clusterNetwork" is required: a CNI config file, a directory, or a NAD name (or an inline default network in "delegates")`)
	}
	return c, nil
}

// ParseBase is Parse without requiring clusterNetwork: plexusd's own
// config, whose default network is found on the node (s6.1).
func ParseBase(stdin []byte) (*Config, error) {
	var keys map[string]json.RawMessage
	if err := daemonconf.Decode(stdin, &keys); err != nil {
		return nil, err
	}
	if err := checkKeys(keys); err != nil {
		return nil, err
	}
	if err := decodeLogOptions(keys); err != nil {
		return nil, fmt.Errorf("plexus config: %w", err)
	}
	c := &Config{}
	if err := daemonconf.Decode(stdin, c); err != nil {
		return nil, err
	}
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("plexus config: %w", err)
	}
	return c, nil
}

func checkKeys(keys map[string]json.RawMessage) error {
	var unknown []string
	for k := range keys {
		if !slices.Contains(plexusKeys, k) && !slices.Contains(cniKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("plexus config: unknown key %q (plexus keys: %s)", slices.Min(unknown), strings.Join(plexusKeys, ", "))
}

func (c *Config) applyDefaults() {
	c.SystemNamespace = cmp.Or(c.SystemNamespace, DefaultSystemNamespace)
	c.CacheDir = cmp.Or(c.CacheDir, DefaultCacheDir)
	c.ConfDir = cmp.Or(c.ConfDir, DefaultConfDir)
	if c.SystemNamespaces == nil {
		c.SystemNamespaces = []string{DefaultSystemNamespace}
	}
	c.PodResourcesSocket = cmp.Or(c.PodResourcesSocket, DefaultPodResourcesSocket)
	c.DeviceInfoDir = cmp.Or(c.DeviceInfoDir, DefaultDeviceInfoDir)
}

func (c *Config) validate() error {
	if c.CNIVersion != "" {
		if _, _, _, err := version.ParseVersion(c.CNIVersion); err != nil {
			return fmt.Errorf(`"cniVersion": %w`, err)
		}
	}
	if c.Kubeconfig != "" && c.Manifests != "" {
		return fmt.Errorf(`"kubeconfig" and "manifests" are exclusive: choose one source`)
	}
	if c.NodeName != "" {
		if err := names.Subdomain(`"nodeName"`, c.NodeName); err != nil {
			return err
		}
	}
	for key, dir := range map[string]string{"podResourcesSocket": c.PodResourcesSocket, "deviceInfoDir": c.DeviceInfoDir} {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%q %q is not an absolute path", key, dir)
		}
	}
	if _, err := c.Level(); err != nil {
		return err
	}
	if c.Compat != "" && c.Compat != CompatMultus && c.Compat != CompatOff {
		return fmt.Errorf(`"compat" %q is not one of %q, %q`, c.Compat, CompatMultus, CompatOff)
	}
	return cmp.Or(c.validateCompat(), c.Daemon().Check())
}

// The values of "compat".
const (
	CompatMultus = "multus"
	CompatOff    = "off"
)

// MultusCompat reports whether plexus accepts what Multus pods use: unless
// "compat" is "off", or unset with strictSelection.
func (c *Config) MultusCompat() bool {
	if c.Compat == "" {
		return !c.StrictSelection
	}
	return c.Compat == CompatMultus
}

// ParseOptions are how this config reads selection annotations (s4.1).
func (c *Config) ParseOptions() selection.ParseOptions {
	return selection.ParseOptions{Compat: c.MultusCompat()}
}

// DefaultParseOptions are a config's without "compat" or
// "strictSelection", for tools without the node's config (plexusctl).
func DefaultParseOptions() selection.ParseOptions {
	return (&Config{}).ParseOptions()
}

// Level maps logLevel to a slog level; the default is info.
func (c *Config) Level() (slog.Level, error) {
	switch strings.ToLower(c.LogLevel) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf(`"logLevel" %q is not one of debug, info, warn, error`, c.LogLevel)
}

// IsPlexusPlugin reports whether a CNI plugin type is plexus itself (the
// plugin or the shim), which the default network must never be.
func IsPlexusPlugin(typ string) bool {
	return typ == "plexus" || typ == "plexus-shim"
}
