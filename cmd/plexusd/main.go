// Command plexusd is plexus's node daemon (thick mode): the plexus shim
// forwards every CNI call to it over a unix socket.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/cmd/internal/install"
	"github.com/plexus-cni/plexus/cmd/plexusd/internal/plexusd"
	"github.com/plexus-cni/plexus/core/codes"
)

// Version is set at build time.
var Version = "dev"

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "plexusd:", err)
		os.Exit(codes.ExitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := plexusd.Run(ctx, o); err != nil {
		o.Log.Error("plexusd failed", "err", err)
		os.Exit(codes.ExitFail)
	}
}

func parseFlags(args []string) (plexusd.Options, error) {
	o := plexusd.Options{Version: Version}
	fs := flag.NewFlagSet("plexusd", flag.ContinueOnError)
	fs.StringVar(&o.ConfigFile, "config", "/etc/plexus/plexusd.json", "plexus config (source, policy, extensions, cacheDir, ...) without clusterNetwork")
	fs.StringVar(&o.Socket, "socket", daemon.DefaultSocket, "unix socket the shim calls (root only)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "127.0.0.1:9191", "address of /metrics, /healthz, /readyz (empty: off)")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (pods of this node are cached)")
	fs.IntVar(&o.MaxParallel, "max-parallel", 32, "CNI calls served at once (one container's calls are always serialized)")
	fs.DurationVar(&o.PolicyPoll, "policy-poll", 2*time.Second, "how often policy files are checked for changes")
	fs.BoolVar(&o.InstallConfig, "install-config", true, "maintain plexus's CNI config in --cni-conf-dir (s6.1)")
	fs.StringVar(&o.ConfDir, "cni-conf-dir", install.DefaultConfDir, "kubelet's CNI config directory")
	fs.StringVar(&o.DefaultConfDir, "default-conf-dir", install.DefaultConfDir, "where the cluster-wide default network writes its CNI config (s6.1.1)")
	fs.StringVar(&o.ConfName, "conf-name", install.DefaultConfName, "plexus's CNI config file name; must sort first")
	fs.StringVar(&o.Readiness, "readiness", plexusd.ReadinessWait, "wait: install plexus's config only once the default network's exists (s6.1.1); block: install at once and hold ADDs until it does (s6.1.2)")
	fs.DurationVar(&o.BlockDeadline, "block-deadline", 2*time.Minute, "with --readiness=block, how long an ADD waits for the default network")
	fs.StringVar(&o.CNIVersion, "cni-version", "", "cniVersion of the CNI config --install-config writes (default: the default network's, at most "+install.DefaultCNIVersion+", which containerd 1.6 accepts)")
	fs.BoolVar(&o.Uninstall, "uninstall", os.Getenv("PLEXUS_UNINSTALL") == "true", "remove plexus's CNI config when stopping (env PLEXUS_UNINSTALL=true)")
	fs.StringVar(&o.BinDir, "cni-bin-dir", install.DefaultBinDir, "the runtime's CNI bin directory: --binaries go there")
	binaries := fs.String("binaries", "", "comma-separated binaries plexusd copies from --src-bin-dir to --cni-bin-dir before it installs plexus's config, and --uninstall removes")
	fs.StringVar(&o.SrcBinDir, "src-bin-dir", install.DefaultSrcBinDir, "directory holding --binaries (plexus's image's)")
	fs.StringVar(&o.CRISocket, "cri-socket", "", "the runtime's CRI socket (default: the config's criSocket); plexusd checks the CNI directories the runtime reports against --cni-conf-dir and --cni-bin-dir")
	fs.BoolVar(&o.Profiling, "profiling", false, "serve Go's pprof under /debug/pprof/ on --metrics-addr")
	fs.StringVar(&o.DelegateRoot, "delegate-root", "", "the host's root directory as plexusd sees it (/proc/1/root with hostPID): delegates run chrooted to it, with the host's tools and files, and plexusd reaches the runtime's socket and pods' network namespaces through it; empty uses plexusd's own filesystem")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 { // a mis-split flag ("--cni-bin-dir /x")
		return o, fmt.Errorf("unexpected argument %q: plexusd takes flags only", fs.Arg(0))
	}
	o.Binaries = install.BinaryList(*binaries)
	// The node's paths given as flags are plexusd's own too.
	fs.Visit(func(f *flag.Flag) {
		o.ConfDirSet = o.ConfDirSet || f.Name == "default-conf-dir"
		o.BinDirSet = o.BinDirSet || f.Name == "cni-bin-dir"
	})
	if len(o.Binaries) > 0 && !o.InstallConfig {
		return o, errors.New("--binaries: only with --install-config, which installs them before plexus's config")
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(*level)); err != nil {
		return o, fmt.Errorf("--log-level: %w", err)
	}
	if o.CNIVersion != "" {
		if err := install.CheckCNIVersion(o.CNIVersion); err != nil {
			return o, fmt.Errorf("--cni-version: %w", err)
		}
	}
	if o.Readiness != plexusd.ReadinessWait && o.Readiness != plexusd.ReadinessBlock {
		return o, fmt.Errorf("--readiness %q: want wait or block", o.Readiness)
	}
	o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	return o, nil
}
