// Package plexusd is the node daemon of thick mode: it serves the shim's
// calls with the thin plugin's pipeline, but with informer caches,
// policies and extension modules compiled once, and metrics. It also keeps
// plexus's CNI config in step with the default network (s6.1).
package plexusd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plexus-cni/plexus/cmd/internal/agent"
	"github.com/plexus-cni/plexus/cmd/internal/cniplugin"
	"github.com/plexus-cni/plexus/cmd/internal/cri"
	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/cmd/internal/install"
	"github.com/plexus-cni/plexus/cmd/internal/stages"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
	"github.com/plexus-cni/plexus/core/source/kube/cached"
	"github.com/plexus-cni/plexus/core/source/manifests"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Readiness modes (s6.1): write plexus's config once the default
// network's exists (s6.1.1), or at once, holding ADDs until it does, up to
// BlockDeadline (s6.1.2).
const (
	ReadinessWait  = "wait"
	ReadinessBlock = "block"
)

// Options configure plexusd.
type Options struct {
	// ConfigFile is plexus's config without clusterNetwork.
	ConfigFile string
	Socket     string
	// MetricsAddr serves /metrics, /healthz and /readyz; "" disables it.
	MetricsAddr string
	NodeName    string
	MaxParallel int
	PolicyPoll  time.Duration
	// InstallConfig maintains plexus's CNI config in ConfDir.
	InstallConfig  bool
	ConfDir        string
	DefaultConfDir string
	ConfName       string
	Readiness      string
	BlockDeadline  time.Duration
	// CNIVersion is the installed config's ("": install.Options').
	CNIVersion string
	// Binaries are copied from SrcBinDir to BinDir; Uninstall removes them.
	Uninstall bool
	Binaries  []string
	SrcBinDir string
	BinDir    string
	// ConfDirSet and BinDirSet: DefaultConfDir and BinDir replace the config's.
	ConfDirSet, BinDirSet bool
	// CRISocket, when set, replaces the config's criSocket.
	CRISocket string
	// Profiling serves Go's pprof under /debug/pprof/ on MetricsAddr.
	Profiling bool
	// DelegateRoot is the host's root directory (cniplugin.Options).
	DelegateRoot string
	Log          *slog.Logger

	// Version is plexus's release, reported in the node's PlexusNode.
	Version string
}

// Daemon is a running plexusd.
type Daemon struct {
	o        Options
	conf     *config.Config
	m        *metrics
	src      source.Source
	manifest *manifests.Dir // the manifests directory, when that is the source
	cache    *cached.Source // the Kubernetes source's caches, when that is the source
	synced   func() bool
	stages   pipeline.Stages
	pub      *publisher  // network-status and events after the reply
	cri      *cri.Client // the runtime's CRI, once dynamic attachments or GC need it
	policy   *reloadingPolicy
	ext      moduleLister // nil without extension modules
	closers  []func()

	// agent publishes the PlexusNode; installed is the config installer.
	agent     *agent.Agent
	installed *install.Installer
	delegates *delegateTypes
	boot      string // the kernel's boot ID, read once (cniplugin.Options.Boot)
}

// Run starts plexusd and serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, o Options) error {
	d, err := start(ctx, o)
	if err != nil {
		return err
	}
	defer d.close()
	return d.serve(ctx)
}

func start(ctx context.Context, o Options) (*Daemon, error) {
	raw, err := os.ReadFile(o.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("plexusd config: %w", err)
	}
	conf, err := config.ParseBase(raw)
	if err != nil {
		return nil, fmt.Errorf("plexusd config %s: %w", o.ConfigFile, err)
	}
	o.nodePaths(conf)
	if o.DelegateRoot != "" {
		if err := cniplugin.CheckDelegateRoot(o.DelegateRoot, delegatePaths(conf)[:1]); err != nil {
			return nil, fmt.Errorf("--delegate-root: %w", err)
		}
	}
	d := &Daemon{o: o, conf: conf, m: newMetrics(), synced: func() bool { return true }, boot: cniplugin.BootID()}
	if o.InstallConfig {
		if d.installed, err = d.installer(); err != nil {
			return nil, fmt.Errorf("CNI config installer: %w", err)
		}
	}
	if err := d.checkRuntimeDirs(ctx); err != nil {
		d.close()
		return nil, err
	}
	if err := d.buildSource(ctx); err != nil {
		return nil, err
	}
	if err := d.buildStages(ctx); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) close() {
	for _, c := range d.closers {
		c()
	}
}

// buildSource: informer caches, or the manifests directory.
func (d *Daemon) buildSource(ctx context.Context) error {
	if d.conf.Manifests != "" {
		d.manifest = manifests.NewDir(d.conf.Manifests)
		return nil
	}
	if d.conf.Kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		// As the thin plugin does: no source, the default network only.
		d.o.Log.Warn("no kubeconfig, no manifests and not in a pod: pods get the default network only")
		return nil
	}
	rc, err := kube.Config(d.conf.Kubeconfig)
	if err != nil {
		return err
	}
	if d.o.NodeName == "" {
		return errors.New("plexusd needs the node name (--node-name or NODE_NAME) to cache this node's pods")
	}
	if err := d.newAgent(rc); err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	c, err := cached.New(ctx, rc, d.o.NodeName, kube.Options{CallTimeout: time.Duration(d.conf.APITimeout), Budget: time.Duration(d.conf.APIBudget), Component: "plexusd", NodeName: d.o.NodeName, Log: d.o.Log})
	if err != nil {
		return err
	}
	c.Misses = func(kind string) { d.m.cacheMisses.WithLabelValues(kind).Inc() }
	counted := countingSource{Source: c, m: d.m}
	d.pub = newPublisher(counted, d.o.Log)
	d.closers = append(d.closers, func() { d.pub.close(publishGrace) })
	d.src, d.synced, d.cache = asyncSource{countingSource: counted, pub: d.pub}, c.HasSynced, c
	return nil
}

// buildStages compiles policies and extension modules once.
func (d *Daemon) buildStages(ctx context.Context) error {
	st, closeStages, err := stages.Options{LongLived: true, Authorizer: d.authorizer}.Build(ctx, d.conf)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, closeStages)
	if st.Preparer != nil {
		if l, ok := st.Preparer.(moduleLister); ok {
			d.ext = l
			d.m.reportModules(l, d.o.Log)
		}
		if w, ok := st.Preparer.(warningDropper); ok {
			d.m.countDroppedWarnings(w)
		}
		ce := countingExtensions{prep: st.Preparer, enr: st.Enricher, m: d.m}
		st.Preparer, st.Enricher = ce, ce
	}
	d.stages = st
	return nil
}

// authorizer is the policy stage (reloadingPolicy).
func (d *Daemon) authorizer(ctx context.Context, pc policies.Config) (pipeline.Authorizer, error) {
	rp, err := newReloadingPolicy(ctx, pc, d.m, d.o.Log)
	if err != nil {
		return nil, err
	}
	d.policy = rp
	if rp.sync == nil {
		go rp.watch(ctx, d.o.PolicyPoll)
	} else if d.agent == nil {
		d.o.Log.Warn("policy object configured but no Kubernetes API: the node's last revision (or the default policy) stays in force", "object", rp.sync.Name())
	} else if err := d.agent.Follow(ctx, rp.sync, rp.observe); err != nil {
		return nil, err
	}
	return rp, nil
}

// NodePolicy is the policy this node enforces, for its PlexusNode, or nil.
func (d *Daemon) NodePolicy() *plexusapi.NodePolicy {
	if d.policy == nil {
		return nil
	}
	np := d.policy.NodePolicy()
	return &np
}

// options is the pipeline runner with plexusd's long-lived parts.
func (d *Daemon) options() cniplugin.Options {
	o := cniplugin.Options{
		Stages: func(context.Context, *config.Config) (pipeline.Stages, func(), error) {
			return d.stages, func() {}, nil
		},
		Log:          d.o.Log,
		Own:          d.conf,
		DelegateRoot: d.o.DelegateRoot,
		Boot:         d.boot,
		WrapCNI:      d.wrapCNI,
		Ignored:      d.m.ignored,
		OnPodResourcesCall: func(method string) {
			d.m.podResources.WithLabelValues(method).Inc()
		},
	}
	// The manifests, the caches, or none (the default network only).
	o.Source = func(_ *config.Config, cmd cniplugin.Command, _ *slog.Logger) (source.Source, error) {
		switch {
		case d.manifest != nil && cmd == cniplugin.CmdDel:
			return manifests.StatusOnly(d.conf.Manifests), nil
		case d.manifest != nil:
			return d.manifest.Current()
		}
		return d.src, nil
	}
	return o
}

func (d *Daemon) serve(ctx context.Context) error {
	// Records written from here on are this plexusd's.
	started := time.Now()
	ln, err := daemon.Listen(d.o.Socket)
	if err != nil {
		return err
	}
	dynamic, err := d.startDynamic(ctx)
	if err == nil {
		err = d.startGC(ctx)
	}
	var installed func()
	if err == nil {
		installed, err = d.startInstaller(ctx)
	}
	if err != nil {
		ln.Close()
		return err
	}
	d.startStatusRepair(ctx, started)
	if d.o.MetricsAddr != "" {
		go d.serveHTTP(ctx)
	}
	srv := &daemon.Server{Handler: d.m.handler(d.block(dynamic(d.pub.handler(d.options().Handle)))), MaxParallel: d.o.MaxParallel, Ready: d.synced, Log: d.o.Log}
	d.o.Log.Info("plexusd serving", "socket", d.o.Socket, "node", d.o.NodeName)
	err = srv.Serve(ctx, ln)
	_ = os.Remove(d.o.Socket)
	// The installer's last pass (--uninstall) runs once ctx is done.
	installed()
	if d.o.Uninstall {
		removed, kept, uerr := d.uninstallState()
		d.o.Log.Info("uninstalled plexusd's state", "removed", removed, "kept", kept)
		err = errors.Join(err, uerr)
	}
	return err
}

// uninstallState removes, with --uninstall, what plexusd keeps on the node
// besides the CNI config and binaries, so a later install starts fresh:
// the policy revisions, the extension cache and the socket's directory;
// records, results, locks and tombstones too unless a record is left (its
// pod's DEL needs them). It returns what it removed and what it kept.
func (d *Daemon) uninstallState() (removed, kept []string, err error) {
	var errs []error
	remove := func(p string) {
		if rerr := os.RemoveAll(p); rerr != nil {
			errs = append(errs, rerr)
			return
		}
		removed = append(removed, p)
	}
	if d.policy != nil && d.policy.sync != nil {
		dir := d.policy.cfg.Object.StateDir
		if rerr := revision.Remove(dir); rerr != nil {
			errs = append(errs, fmt.Errorf("policy state %s: %w", dir, rerr))
		} else {
			removed = append(removed, dir)
			_ = os.Remove(dir) // only if empty
		}
	}
	if c := d.conf.CacheDir; c != "" {
		remove(filepath.Join(c, "extensions"))
		records := filepath.Join(c, "records")
		if left, _ := os.ReadDir(records); len(left) > 0 {
			kept = append(kept, fmt.Sprintf("%s (%d attachment record(s) of pods still attached)", c, len(left)))
		} else {
			for _, sub := range []string{"records", "results", "locks", "deleted"} {
				remove(filepath.Join(c, sub))
			}
			_ = os.Remove(c) // only if empty
		}
	}
	if d.o.Socket != "" {
		_ = os.Remove(filepath.Dir(d.o.Socket)) // only if empty: a mount point stays
	}
	return removed, kept, errors.Join(errs...)
}

// block holds ADDs until the default network's config exists (s6.1.2).
func (d *Daemon) block(next daemon.Handler) daemon.Handler {
	if !d.o.InstallConfig || d.o.Readiness != ReadinessBlock {
		return next
	}
	return func(ctx context.Context, c *daemon.Call) *daemon.Reply {
		if c.Command() == "ADD" {
			if err := d.waitDefault(ctx); err != nil {
				return &daemon.Reply{Failed: true, Stdout: []byte(fmt.Sprintf(`{"code":%d,"msg":%q}`, codes.DefaultNotReady, err.Error()))}
			}
		}
		return next(ctx, c)
	}
}

func (d *Daemon) waitDefault(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.BlockDeadline)
	defer cancel()
	for {
		if defaultPresent(d.o.DefaultConfDir, d.o.ConfName) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster-wide default network's CNI config did not appear in %s within %s (s6.1.2)", d.o.DefaultConfDir, d.o.BlockDeadline)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// defaultPresent reports a CNI config in dir other than plexus's own.
func defaultPresent(dir, ours string) bool {
	entries, _ := os.ReadDir(dir)
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return e.Name() != ours && slices.Contains([]string{".conf", ".conflist", ".json"}, filepath.Ext(e.Name()))
	})
}

// startInstaller runs the config installer and the node agent, if any.
func (d *Daemon) startInstaller(ctx context.Context) (wait func(), err error) {
	var running sync.WaitGroup
	if d.installed != nil {
		// The shim before the config that names it.
		if err := d.installed.InstallBinaries(); err != nil {
			return nil, err
		}
		running.Go(func() {
			if err := d.installed.Run(ctx); err != nil {
				d.o.Log.Error("CNI config installer stopped", "err", err)
			}
		})
	} else if d.agent != nil {
		// Without the installer, the config shows as not installed.
		d.agent.Notify()
	}
	if d.agent != nil {
		go d.agent.Run(ctx) // with the installer, its first write follows the installer's first pass
	}
	return running.Wait, nil
}

// installer writes the shim's config: plexusd's socket and CallSettings.
func (d *Daemon) installer() (*install.Installer, error) {
	extra, err := callSettings(d.conf.CallSettings)
	if err != nil {
		return nil, err
	}
	extra["daemonSocket"] = d.o.Socket
	return install.New(install.Options{
		ConfigOnly: true, Immediate: d.o.Readiness == ReadinessBlock, PluginType: "plexus-shim",
		CNIVersion: d.o.CNIVersion, Manifests: d.conf.Manifests,
		ConfDir: d.o.ConfDir, DefaultConfDir: d.o.DefaultConfDir, ConfName: d.o.ConfName,
		Binaries: d.o.Binaries, SrcBinDir: d.o.SrcBinDir, BinDir: d.o.BinDir,
		Extra: extra, Uninstall: d.o.Uninstall, Poll: time.Second, Log: d.o.Log,
	})
}

// callSettings is cs as the config keys it sets.
func callSettings(cs config.CallSettings) (map[string]any, error) {
	var m map[string]any
	raw, err := json.Marshal(cs)
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err != nil {
		return nil, fmt.Errorf("plexusd's call settings: %w", err)
	}
	return m, nil
}

func (d *Daemon) serveHTTP(ctx context.Context) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.m.reg, promhttp.HandlerOpts{}))
	if d.o.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.synced() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: d.o.MetricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		d.o.Log.Error("metrics server", "err", err)
	}
}
