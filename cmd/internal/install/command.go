package install

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	"github.com/plexus-cni/plexus/core/codes"
)

// Flags are `plexusctl install`'s flags as parsed.
type Flags struct {
	o                                 Options
	binaries, defaults, extra, server string
}

// AddFlags registers `plexusctl install`'s flags on fs.
func AddFlags(fs *pflag.FlagSet, getenv func(string) string) *Flags {
	f := &Flags{}
	o := &f.o
	fs.StringVar(&o.SrcBinDir, "src-bin-dir", DefaultSrcBinDir, "directory holding the binaries to install")
	fs.StringVar(&o.PolicySrcDir, "policy-src-dir", DefaultPolicySrc, "directory holding the policy files to install (the image's rule library and baseline)")
	fs.StringVar(&o.PolicyDir, "policy-dir", "", `the host directory to copy --policy-src-dir's policy files to, before the config is written; the installer owns it (name its files in --config's "policy"); empty copies none`)
	fs.StringVar(&o.PolicyObject, "policy-object", "", `the AttachmentPolicy this node follows: its revisions, verified, are kept in --policy-dir, and the plugin's config names the library and the active one (empty: --config's "policy" as given)`)
	fs.StringVar(&o.ExtensionsSrcDir, "extensions-src-dir", DefaultExtensionsSrc, "directory holding extension modules as NAME/module.wasm (the extension images' volumes or init containers' emptyDirs)")
	fs.StringVar(&o.ExtensionsDir, "extensions-dir", "", `the host directory to copy each module --config's "extensions" names (by its path in --extensions-src-dir) to, as NAME/module.wasm, checked, before the config is written; the installer owns it and the config names the copies; empty copies none`)
	fs.StringVar(&f.defaults, "policy-defaults", "", "comma-separated policy files in force until a revision of --policy-object is activated (default: --policy-dir's baseline.yaml)")
	fs.StringVar(&f.binaries, "binaries", "plexus", "comma-separated binaries to copy from --src-bin-dir")
	fs.StringVar(&o.BinDir, "cni-bin-dir", DefaultBinDir, "the host's CNI bin directory")
	fs.StringVar(&o.DefaultConfDir, "default-conf-dir", DefaultConfDir, "where the cluster-wide default network writes its CNI config")
	fs.StringVar(&o.ConfDir, "cni-conf-dir", "", "kubelet's CNI config directory (default: --default-conf-dir; s6.1.1 recommends a directory of its own)")
	fs.StringVar(&o.ConfName, "conf-name", DefaultConfName, "plexus's config file name; must sort before the default network's")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", DefaultKubeconfig, "where to write the plugin's kubeconfig")
	fs.StringVar(&o.TokenFile, "token-file", DefaultTokenFile, "the ServiceAccount token (projected, rotated by kubelet)")
	fs.StringVar(&o.CAFile, "ca-file", DefaultCAFile, "the API server's CA bundle")
	fs.StringVar(&o.NodeName, "node-name", getenv("NODE_NAME"), "this node's name (env NODE_NAME): the plugin's kubeconfig gets a token bound to this Node, which survives the installer pod's replacement; empty uses the pod's token")
	fs.DurationVar(&o.TokenTTL, "token-ttl", DefaultTokenTTL, "requested lifetime of the node-bound token (10m to 24h; renewed at 80%)")
	fs.StringVar(&f.server, "server", "", "API server URL (default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
	fs.StringVar(&f.extra, "config", "", `JSON object of plexus config keys to add, e.g. '{"logLevel":"debug"}'`)
	fs.DurationVar(&o.Poll, "poll", DefaultPoll, "how often to check the token and the default network")
	fs.BoolVar(&o.BinariesOnly, "binaries-only", false, "copy the binaries and exit (thick mode: plexusd maintains the config)")
	fs.StringVar(&o.CNIVersion, "cni-version", "", "cniVersion of plexus's config (default: the default network's, at most "+DefaultCNIVersion+", which containerd 1.6 accepts)")
	fs.BoolVar(&o.Uninstall, "uninstall", false, "on SIGTERM, remove what was installed (env PLEXUS_UNINSTALL=true)")
	return f
}

// Options completes the parsed flags (PLEXUS_UNINSTALL, --server's default).
func (f *Flags) Options(getenv func(string) string) (Options, error) {
	o := f.o
	if v := getenv("PLEXUS_UNINSTALL"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("PLEXUS_UNINSTALL=%q: want true or false", v)
		}
		o.Uninstall = o.Uninstall || b
	}
	o.ConfDir = cmp.Or(o.ConfDir, o.DefaultConfDir)
	o.Binaries = BinaryList(f.binaries)
	o.PolicyDefaults = BinaryList(f.defaults)
	if f.extra != "" {
		if err := json.Unmarshal([]byte(f.extra), &o.Extra); err != nil {
			return o, fmt.Errorf("--config: want a JSON object: %w", err)
		}
	}
	if o.Server = f.server; o.Server == "" && !o.BinariesOnly {
		var err error
		if o.Server, err = ServerFromEnv(getenv); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Run is `plexusctl install` until ctx ends; it returns the exit status.
func Run(ctx context.Context, o Options, stderr io.Writer, version string) int {
	o.Log = slog.New(slog.NewTextHandler(stderr, nil))
	cfg, err := apiClients(&o)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl install: API client: %v\n", err)
		return codes.ExitUsage
	}
	in, err := New(o)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl install: %v\n", err)
		return codes.ExitUsage
	}
	if cfg != nil {
		a, err := in.Agent(version)
		if err != nil {
			fmt.Fprintf(stderr, "plexusctl install: node agent: %v\n", err)
			return codes.ExitUsage
		}
		var running sync.WaitGroup
		defer running.Wait()
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		running.Go(func() { a.Run(rctx) })
	}
	if err := in.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "plexusctl install: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}

// apiClients sets o's clients when the installer talks to the API.
func apiClients(o *Options) (*rest.Config, error) {
	if o.NodeName == "" || o.BinariesOnly {
		return nil, nil
	}
	// client-go rereads the projected token as kubelet rotates it.
	cfg := &rest.Config{
		Host: o.Server, BearerTokenFile: o.TokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: o.CAFile},
		UserAgent:       "plexusctl-install",
	}
	var err error
	if o.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if o.Plexus, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// BinaryList reads a comma-separated --binaries flag.
func BinaryList(flag string) []string {
	var out []string
	for b := range strings.SplitSeq(flag, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
