// Package install is what the plexus DaemonSet runs on every node: it
// copies the plexus binaries to the host's CNI bin directory, keeps the
// plugin's kubeconfig with a node-bound (else the pod's) token, and writes
// plexus's CNI config into kubelet's CNI config directory only once the
// cluster-wide default network's is there (s6.1, s6.1.1). On shutdown it
// can remove what it installed.
package install

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/cmd/internal/agent"
	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/extensions"
)

// Options say where things are, the same paths in the container as on the host.
type Options struct {
	// Binaries are copied from SrcBinDir, in the image, to BinDir, the
	// host's CNI bin directory (with ConfigOnly: only removed on uninstall).
	SrcBinDir string
	Binaries  []string
	BinDir    string
	// DefaultConfDir holds the default network's CNI config; ConfDir is
	// kubelet's, where plexus's goes (the same unless s6.1.1).
	DefaultConfDir string
	ConfDir        string
	// ConfName must sort before the default network's (kubelet uses the first).
	ConfName string
	// Kubeconfig is written for the plugin from TokenFile, CAFile and Server.
	Kubeconfig string
	TokenFile  string
	CAFile     string
	Server     string
	// Client and NodeName give the kubeconfig a node-bound token (token.go).
	Client   kubernetes.Interface
	NodeName string
	// TokenTTL is the node token's requested lifetime (DefaultTokenTTL).
	TokenTTL time.Duration
	// Extra are plexus config keys added to the generated config.
	Extra map[string]any
	// PolicySrcDir holds the image's policy files, copied to PolicyDir.
	PolicySrcDir string
	PolicyDir    string
	// PolicyObject names the AttachmentPolicy the node follows: its
	// verified revisions are kept in PolicyDir and the plugin's config
	// names the library and the active one (policies/revision).
	// PolicyDefaults stand in until one is activated (default:
	// PolicyDir's baseline.yaml).
	PolicyObject   string
	PolicyDefaults []string
	// ExtensionsSrcDir holds extension modules as NAME/module.wasm; with
	// ExtensionsDir set, each one Extra's "extensions" names is checked and
	// copied there, on the host (InstallExtensions).
	ExtensionsSrcDir string
	ExtensionsDir    string
	Plexus           versioned.Interface
	// Poll is how often the token and the default network are checked.
	Poll time.Duration
	// OnChange is called after a pass that found Observed changed.
	OnChange func()
	// Uninstall removes what was installed when Run's context ends.
	Uninstall bool
	// BinariesOnly copies the binaries and returns (thick's init container).
	BinariesOnly bool
	// PluginType is the config's "type" (unset: "plexus").
	PluginType string
	// ConfigOnly manages plexus's CNI config alone (plexusd).
	ConfigOnly bool
	// Immediate writes the config at once, its clusterNetwork naming
	// DefaultConfDir (s6.1.2: plexusd blocks ADDs until the default
	// network is ready).
	Immediate bool
	// CNIVersion is the config's; "" is defaultVersion's.
	CNIVersion string
	// Manifests is the config's "manifests", for a DEL without plexusd.
	Manifests string
	Log       *slog.Logger
}

// Defaults for a node laid out as kubeadm and most distributions do.
const (
	DefaultSrcBinDir  = "/opt/plexus/bin"
	DefaultPolicySrc  = "/opt/plexus/policy"
	DefaultBinDir     = "/opt/cni/bin"
	DefaultConfDir    = "/etc/cni/net.d"
	DefaultConfName   = "00-plexus.conflist"
	DefaultKubeconfig = "/etc/cni/net.d/plexus.d/plexus.kubeconfig"
	DefaultTokenFile  = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	DefaultCAFile     = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	DefaultPoll       = 2 * time.Second
)

// ServerFromEnv is the API server URL kubelet gives every pod.
func ServerFromEnv(getenv func(string) string) (string, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not running in a pod? (use --server)")
	}
	return "https://" + net.JoinHostPort(host, port), nil
}

func (o *Options) check() error {
	if o.ConfName == "" || filepath.Base(o.ConfName) != o.ConfName || !strings.HasSuffix(o.ConfName, ".conflist") {
		return fmt.Errorf("config name %q: want a file name ending in .conflist", o.ConfName)
	}
	paths := map[string]string{"conf dir": o.ConfDir, "default conf dir": o.DefaultConfDir}
	if !o.ConfigOnly || len(o.Binaries) > 0 {
		paths["bin dir"] = o.BinDir
	}
	for _, b := range o.Binaries {
		if b == "" || b == "." || b == ".." || filepath.Base(b) != b {
			return fmt.Errorf("binary %q: want a file name in the bin dir", b)
		}
	}
	if !o.ConfigOnly && !o.BinariesOnly {
		maps.Copy(paths, map[string]string{"kubeconfig": o.Kubeconfig, "token file": o.TokenFile, "CA file": o.CAFile})
		if !strings.HasPrefix(o.Server, "https://") {
			return fmt.Errorf("API server %q: want an https:// URL", o.Server)
		}
	}
	if o.PolicyDir != "" {
		if o.ConfigOnly || o.BinariesOnly {
			return fmt.Errorf("policy dir %q: only for an installer that writes plexus's config for the plugin", o.PolicyDir)
		}
		paths["policy dir"], paths["policy source dir"] = o.PolicyDir, o.PolicySrcDir
		// The installer removes policy files there that the source lacks.
		for name, d := range map[string]string{"policy source dir": o.PolicySrcDir, "conf dir": o.ConfDir, "default conf dir": o.DefaultConfDir, "bin dir": o.BinDir} {
			if within(d, o.PolicyDir) {
				return fmt.Errorf("policy dir %q holds the %s %q: give it a directory of its own", o.PolicyDir, name, d)
			}
		}
	}
	if err := o.checkPolicyObject(); err != nil {
		return err
	}
	for name, v := range paths {
		if !filepath.IsAbs(v) {
			return fmt.Errorf("%s %q: want an absolute path", name, v)
		}
	}
	for _, k := range []string{"type", "clusterNetwork", "kubeconfig", "manifests"} {
		if _, ok := o.Extra[k]; ok {
			return fmt.Errorf("extra config key %q is set by the installer", k)
		}
	}
	if o.CNIVersion != "" {
		if err := CheckCNIVersion(o.CNIVersion); err != nil {
			return err
		}
	}
	if o.Manifests != "" && (!o.ConfigOnly || !filepath.IsAbs(o.Manifests)) {
		return fmt.Errorf("manifests %q: only for a config-only install, as an absolute path", o.Manifests)
	}
	o.Poll = cmp.Or(max(o.Poll, 0), DefaultPoll)
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	o.TokenTTL = cmp.Or(o.TokenTTL, DefaultTokenTTL)
	if o.TokenTTL < minTokenTTL {
		return fmt.Errorf("token TTL %s: TokenRequest accepts no less than %s", o.TokenTTL, minTokenTTL)
	}
	if o.TokenTTL > maxTokenTTL {
		return fmt.Errorf("token TTL %s: deploy/base/admission.yaml (plexus-tokens) refuses more than %s", o.TokenTTL, maxTokenTTL)
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Installer keeps one node's installation in step.
type Installer struct {
	o    Options
	now  func() time.Time
	node nodeToken
	// agent reports the node and follows PolicyObject; nil without the API.
	agent *agent.Agent
	ext   []extModule
	// mu guards what observe and InstallExtensions found.
	mu        sync.Mutex
	seen      nodestate.Install
	extConfig map[string]any
	extNodes  []extensions.ModuleState
}

// New checks the options.
func New(o Options) (*Installer, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	ext, err := o.checkExtensions()
	if err != nil {
		return nil, err
	}
	return &Installer{o: o, now: time.Now, ext: ext}, nil
}

// Run installs the binaries, then reconciles every Poll until ctx ends,
// then with Uninstall removes what it installed. Transient problems are
// logged and retried.
func (in *Installer) Run(ctx context.Context) error {
	if !in.o.ConfigOnly {
		if err := in.InstallBinaries(); err != nil {
			return err
		}
	}
	// Before the first config, which may name them.
	if err := in.InstallPolicy(); err != nil {
		return err
	}
	if err := in.InstallExtensions(ctx); err != nil {
		return err
	}
	if err := in.startPolicyObject(ctx); err != nil {
		return err
	}
	if in.o.BinariesOnly {
		in.o.Log.Info("binaries installed", "dir", in.o.BinDir, "binaries", in.o.Binaries)
		return nil
	}
	for {
		if err := in.Reconcile(ctx); err != nil {
			in.o.Log.Warn("install pass incomplete; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			if in.o.Uninstall {
				return in.Uninstall()
			}
			in.o.Log.Info("stopping; leaving plexus installed (uninstall not set)")
			return nil
		case <-time.After(in.o.Poll):
		}
	}
}

// Reconcile is one pass: the kubeconfig, which the config needs, then the config.
func (in *Installer) Reconcile(ctx context.Context) error {
	if !in.o.ConfigOnly {
		if err := in.writeKubeconfig(ctx); err != nil {
			return err
		}
	}
	return in.reconcileConfig()
}

// Uninstall removes plexus's config first, so kubelet falls back, then the rest.
func (in *Installer) Uninstall() error {
	var errs []error
	paths := []string{filepath.Join(in.o.ConfDir, in.o.ConfName)}
	if !in.o.ConfigOnly {
		paths = append(paths, in.o.Kubeconfig)
	}
	// A config-only installer only removes binaries (the init container's).
	for _, b := range in.o.Binaries {
		paths = append(paths, filepath.Join(in.o.BinDir, b))
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// Once the config naming them is gone.
	if err := in.uninstallPolicyObject(); err != nil {
		errs = append(errs, err)
	}
	if err := in.uninstallExtensions(); err != nil {
		errs = append(errs, err)
	} else if in.o.ExtensionsDir != "" {
		paths = append(paths, in.o.ExtensionsDir)
	}
	if err := in.uninstallPolicy(); err != nil {
		errs = append(errs, err)
	} else if in.o.PolicyDir != "" {
		paths = append(paths, in.o.PolicyDir)
	}
	// The kubeconfig's own directory, if now empty.
	if dir := filepath.Dir(in.o.Kubeconfig); !in.o.ConfigOnly && dir != in.o.ConfDir && dir != in.o.DefaultConfDir {
		_ = os.Remove(dir)
	}
	in.o.Log.Info("uninstalled", "removed", paths)
	return errors.Join(errs...)
}

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
