package install

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/plexus-cni/plexus/core/codes"
)

// ParseArgs reads `plexusctl install` flags; PLEXUS_UNINSTALL=true in the
// environment sets --uninstall, so the DaemonSet can switch it without
// changing the command.
func ParseArgs(args []string, getenv func(string) string, stderr io.Writer) (Options, error) {
	fs := flag.NewFlagSet("plexusctl install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := Options{}
	var binaries, extra, server string
	fs.StringVar(&o.SrcBinDir, "src-bin-dir", DefaultSrcBinDir, "directory holding the binaries to install")
	fs.StringVar(&o.PolicySrcDir, "policy-src-dir", DefaultPolicySrc, "directory holding the policy files to install (the image's rule library and baseline)")
	fs.StringVar(&o.PolicyDir, "policy-dir", "", `the host directory to copy --policy-src-dir's policy files to, before the config is written; the installer owns it (name its files in --config's "policy"); empty copies none`)
	fs.StringVar(&o.PolicyObject, "policy-object", "", `the AttachmentPolicy this node follows: its revisions, verified, are kept in --policy-dir, and the plugin's config names the library and the active one (empty: --config's "policy" as given)`)
	fs.StringVar(&o.ExtensionsSrcDir, "extensions-src-dir", DefaultExtensionsSrc, "directory holding extension modules as NAME/module.wasm (the extension images' volumes or init containers' emptyDirs)")
	fs.StringVar(&o.ExtensionsDir, "extensions-dir", "", `the host directory to copy each module --config's "extensions" names (by its path in --extensions-src-dir) to, as NAME/module.wasm, checked, before the config is written; the installer owns it and the config names the copies; empty copies none`)
	var defaults string
	fs.StringVar(&defaults, "policy-defaults", "", "comma-separated policy files in force until a revision of --policy-object is activated (default: --policy-dir's baseline.yaml)")
	fs.StringVar(&binaries, "binaries", "plexus", "comma-separated binaries to copy from --src-bin-dir")
	fs.StringVar(&o.BinDir, "cni-bin-dir", DefaultBinDir, "the host's CNI bin directory")
	fs.StringVar(&o.DefaultConfDir, "default-conf-dir", DefaultConfDir, "where the cluster-wide default network writes its CNI config")
	fs.StringVar(&o.ConfDir, "cni-conf-dir", "", "kubelet's CNI config directory (default: --default-conf-dir; s6.1.1 recommends a directory of its own)")
	fs.StringVar(&o.ConfName, "conf-name", DefaultConfName, "plexus's config file name; must sort before the default network's")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", DefaultKubeconfig, "where to write the plugin's kubeconfig")
	fs.StringVar(&o.TokenFile, "token-file", DefaultTokenFile, "the ServiceAccount token (projected, rotated by kubelet)")
	fs.StringVar(&o.CAFile, "ca-file", DefaultCAFile, "the API server's CA bundle")
	fs.StringVar(&o.NodeName, "node-name", getenv("NODE_NAME"), "this node's name (env NODE_NAME): the plugin's kubeconfig gets a token bound to this Node, which survives the installer pod's replacement; empty uses the pod's token")
	fs.DurationVar(&o.TokenTTL, "token-ttl", DefaultTokenTTL, "requested lifetime of the node-bound token (10m to 24h; renewed at 80%)")
	fs.StringVar(&server, "server", "", "API server URL (default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
	fs.StringVar(&extra, "config", "", `JSON object of plexus config keys to add, e.g. '{"logLevel":"debug"}'`)
	fs.DurationVar(&o.Poll, "poll", DefaultPoll, "how often to check the token and the default network")
	fs.BoolVar(&o.BinariesOnly, "binaries-only", false, "copy the binaries and exit (thick mode: plexusd maintains the config)")
	fs.StringVar(&o.CNIVersion, "cni-version", "", "cniVersion of plexus's config (default: the default network's, at most "+DefaultCNIVersion+", which containerd 1.6 accepts)")
	fs.BoolVar(&o.Uninstall, "uninstall", false, "on SIGTERM, remove what was installed (env PLEXUS_UNINSTALL=true)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if v := getenv("PLEXUS_UNINSTALL"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("PLEXUS_UNINSTALL=%q: want true or false", v)
		}
		o.Uninstall = o.Uninstall || b
	}
	if o.ConfDir == "" {
		o.ConfDir = o.DefaultConfDir
	}
	o.Binaries = BinaryList(binaries)
	o.PolicyDefaults = BinaryList(defaults)
	if extra != "" {
		if err := json.Unmarshal([]byte(extra), &o.Extra); err != nil {
			return o, fmt.Errorf("--config: want a JSON object: %w", err)
		}
	}
	if o.Server = server; o.Server == "" && !o.BinariesOnly {
		var err error
		if o.Server, err = ServerFromEnv(getenv); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Command is `plexusctl install`: it runs until ctx ends (SIGTERM).
// version is plexus's release, reported in the node's PlexusNode.
func Command(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, version string) int {
	o, err := ParseArgs(args, getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl install: %v\n", err)
		return codes.ExitUsage
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, nil))
	var cfg *rest.Config
	if o.NodeName != "" && !o.BinariesOnly {
		// Authenticates with the projected token, which client-go rereads
		// as kubelet rotates it.
		cfg = &rest.Config{
			Host: o.Server, BearerTokenFile: o.TokenFile,
			TLSClientConfig: rest.TLSClientConfig{CAFile: o.CAFile},
			UserAgent:       "plexusctl-install",
		}
		o.Client, err = kubernetes.NewForConfig(cfg)
		if err == nil {
			o.Dynamic, err = dynamic.NewForConfig(cfg)
		}
		if err != nil {
			fmt.Fprintf(stderr, "plexusctl install: API client: %v\n", err)
			return codes.ExitUsage
		}
	}
	in, err := New(o)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl install: %v\n", err)
		return codes.ExitUsage
	}
	if cfg != nil {
		// The node's PlexusNode: what this installer put in place.
		r, err := in.Reporter(cfg, version)
		if err != nil {
			fmt.Fprintf(stderr, "plexusctl install: node state: %v\n", err)
			return codes.ExitUsage
		}
		rctx, stop := context.WithCancel(ctx)
		defer runReporter(rctx, r)()
		defer stop()
	}
	if err := in.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "plexusctl install: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}

// BinaryList reads a --binaries flag: comma-separated names, blanks and
// empty entries dropped (New checks that each is a plain file name).
func BinaryList(flag string) []string {
	var out []string
	for b := range strings.SplitSeq(flag, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
