// Package cniplugin turns one CNI invocation (skel's CmdArgs) into a run of
// the core pipeline: it reads plexus's config, opens the log, builds the
// source, the stages and libcni, and maps the command to the pipeline.
package cniplugin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/cniargs"
	"github.com/plexus-cni/plexus/cmd/internal/hostroot"
	"github.com/plexus-cni/plexus/cmd/internal/logfile"
	"github.com/plexus-cni/plexus/cmd/internal/podresources"
	"github.com/plexus-cni/plexus/cmd/internal/podroute"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/lock"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
	"github.com/plexus-cni/plexus/core/source/manifests"
)

// Options are what differs between the thin plugin and plexusd.
type Options struct {
	// Stages builds the optional stages; close releases what they hold.
	Stages func(ctx context.Context, conf *config.Config) (stages pipeline.Stages, close func(), err error)
	// The rest, when set, are plexusd's: Source replaces the per-call
	// source, Log the config's logFile; WrapCNI wraps libcni, and Ignored
	// and OnPodResourcesCall are told of each ignored selection key and
	// pod-resources call (plexusd counts them).
	Source             func(conf *config.Config, cmd Command, log *slog.Logger) (source.Source, error)
	Log                *slog.Logger
	WrapCNI            func(libcni.CNI) libcni.CNI
	Ignored            func(key string)
	OnPodResourcesCall func(method string)
	// Own is plexusd's config: its binDir, cacheDir and confDir replace
	// every forwarded call's, so a caller cannot name programs or files.
	Own *config.Config
	// DelegateRoot is the host's root directory (plexusd in a pod):
	// delegates run chrooted to it (delegateExec), and host paths such as
	// the pod's network namespace are opened inside it (hostroot).
	DelegateRoot string
	Boot         string // the kernel's boot ID (BootID); "": every DEL lists libcni's cache

	// parse replaces config.Parse in tests, which count the parses.
	parse func([]byte) (*config.Config, error)
}

// Command is a CNI command plexus runs.
type Command int

// The commands; VERSION is answered by skel itself.
const (
	CmdAdd Command = iota
	CmdDel
	CmdCheck
	CmdGC
	CmdStatus
)

var commandNames = [...]string{"ADD", "DEL", "CHECK", "GC", "STATUS"}

func (c Command) String() string { return commandNames[c] }

// ParseCommand maps CNI_COMMAND to a Command.
func ParseCommand(s string) (Command, error) {
	if i := slices.Index(commandNames[:], s); i >= 0 {
		return Command(i), nil
	}
	return 0, fmt.Errorf("CNI_COMMAND %q is not one of ADD, DEL, CHECK, GC, STATUS", s)
}

// Run runs one CNI command through the pipeline; ADD's result goes to stdout.
func (o Options) Run(ctx context.Context, conf *config.Config, cmd Command, a *skel.CmdArgs, stdout io.Writer) error {
	start := time.Now()
	log, closeLog, err := o.openLog(conf)
	if err != nil {
		return types.NewError(codes.InvalidNetworkConfig, err.Error(), "")
	}
	defer closeLog()
	// Bounds one CNI call; kubelet's own runtime timeout is longer.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	p, cleanup, err := o.build(ctx, conf, a, cmd, log)
	if err != nil {
		return err
	}
	defer cleanup()
	req, err := request(a, conf)
	if err != nil {
		return types.NewError(codes.InvalidEnvironment, err.Error(), "")
	}
	p.Log = callLogger(log, cmd, a)
	return dispatch(ctx, p, req, cmd, stdout, start)
}

// callLogger names the call (command, container, interface) in every line.
func callLogger(log *slog.Logger, cmd Command, a *skel.CmdArgs) *slog.Logger {
	attrs := []any{"cmd", cmd.String()}
	if a.ContainerID != "" {
		attrs = append(attrs, "container", a.ContainerID)
	}
	if a.IfName != "" {
		attrs = append(attrs, "ifName", a.IfName)
	}
	return log.With(attrs...)
}

// dispatch runs the command. Every outcome's log line carries the call's
// time in plexus from start, which is how operators and the density
// benchmark read per-pod ADD latency.
func dispatch(ctx context.Context, p *pipeline.Pipeline, req *pipeline.Request, cmd Command, stdout io.Writer, start time.Time) error {
	var res types.Result
	var err error
	switch cmd {
	case CmdAdd:
		res, err = p.Add(ctx, req)
	case CmdDel:
		err = p.Del(ctx, req)
	case CmdCheck:
		err = p.Check(ctx, req)
	case CmdGC:
		err = p.GC(ctx, p.Config.ValidAttachments)
	default:
		err = p.Status(ctx)
	}
	if err != nil {
		p.Log.Error(cmd.String()+" failed", "err", err, "elapsed", time.Since(start))
		return err
	}
	p.Log.Info(cmd.String()+" done", "elapsed", time.Since(start))
	if cmd == CmdAdd {
		return res.PrintTo(stdout)
	}
	return nil
}

// build assembles the pipeline. DEL needs neither the API nor the stages.
func (o Options) build(ctx context.Context, conf *config.Config, a *skel.CmdArgs, cmd Command, log *slog.Logger) (*pipeline.Pipeline, func(), error) {
	p := o.Pipeline(conf, pluginPaths(conf, a), log)
	sources := o.Source
	if sources == nil {
		sources = buildSource
	}
	src, err := sources(conf, cmd, log)
	if err != nil {
		if cmd != CmdDel {
			return nil, nil, types.NewError(codes.PodLookup, err.Error(), "")
		}
		log.Warn("source unavailable for DEL; continuing from the record", "err", err)
		src = nil // not a typed nil the pipeline would call
	}
	p.Source = src
	if cmd == CmdAdd {
		// Connects only when a NAD names a resource (pipeline.assignDevices).
		p.Devices = &podresources.Client{Socket: conf.PodResourcesSocket, OnCall: o.OnPodResourcesCall}
	}
	closeSource := func() {}
	if c, ok := src.(interface{ Close() }); ok {
		closeSource = c.Close
	}
	cleanup := closeSource
	if cmd == CmdAdd && o.Stages != nil {
		st, closeStages, err := o.Stages(ctx, conf)
		if err != nil {
			closeSource()
			return nil, nil, types.NewError(codes.InvalidNetworkConfig, err.Error(), "")
		}
		p.Stages = st
		cleanup = func() { closeStages(); closeSource() }
	}
	return p, cleanup, nil
}

// Pipeline is the pipeline without source and stages.
func (o Options) Pipeline(conf *config.Config, paths []string, log *slog.Logger) *pipeline.Pipeline {
	p := &pipeline.Pipeline{
		Config:    conf,
		CNI:       libcni.NewCNIConfigWithCacheDir(paths, conf.CacheDir, &delegateExec{root: o.DelegateRoot, log: log}),
		Records:   &record.Store{Dir: filepath.Join(conf.CacheDir, "records"), Boot: o.Boot},
		Deleted:   &record.Tombstones{Dir: filepath.Join(conf.CacheDir, "deleted"), Boot: o.Boot},
		Locks:     &lock.Locker{Dir: filepath.Join(conf.CacheDir, "locks")},
		Routes:    podroute.Netlink{Root: o.DelegateRoot},
		OnIgnored: o.Ignored,
		Log:       log,
	}
	if o.DelegateRoot != "" {
		p.Exists = func(path string) (bool, error) { return hostroot.Exists(o.DelegateRoot, path) }
	}
	if o.WrapCNI != nil {
		p.CNI = o.WrapCNI(p.CNI)
	}
	return p
}

// sourceKind is which source a call uses.
type sourceKind int

const (
	noSource sourceKind = iota
	manifestsSource
	kubeconfigSource
	inClusterSource
)

// chooseSource picks manifests, a kubeconfig or in-cluster; DEL never needs the API.
func chooseSource(conf *config.Config, cmd Command, getenv func(string) string) sourceKind {
	switch {
	case conf.Manifests != "":
		return manifestsSource
	case cmd == CmdDel:
		return noSource
	case conf.Kubeconfig != "":
		return kubeconfigSource
	case getenv("KUBERNETES_SERVICE_HOST") != "":
		return inClusterSource
	}
	return noSource
}

// buildSource builds the chosen source, rereading rotated credentials.
func buildSource(conf *config.Config, cmd Command, log *slog.Logger) (source.Source, error) {
	switch chooseSource(conf, cmd, os.Getenv) {
	case manifestsSource:
		if cmd == CmdDel {
			return manifests.StatusOnly(conf.Manifests), nil
		}
		return manifests.Load(conf.Manifests)
	case noSource:
		return nil, nil
	}
	rc, err := kube.Config(conf.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// An ADD's first request comes after its delegates: connect meanwhile.
	return kube.New(rc, kube.Options{CallTimeout: time.Duration(conf.APITimeout), Budget: time.Duration(conf.APIBudget), Log: log, Prewarm: cmd == CmdAdd, NodeName: conf.NodeName})
}

// pluginPaths puts binDir before CNI_PATH.
func pluginPaths(conf *config.Config, a *skel.CmdArgs) []string {
	paths := append([]string{conf.BinDir}, filepath.SplitList(a.Path)...)
	return slices.DeleteFunc(paths, func(p string) bool { return p == "" })
}

// request is the call for the pipeline, CNI_ARGS as the runtime sent them.
func request(a *skel.CmdArgs, conf *config.Config) (*pipeline.Request, error) {
	_, args, err := cniargs.Load(a.Args)
	if err != nil {
		return nil, err
	}
	return &pipeline.Request{
		ContainerID: a.ContainerID,
		NetNS:       a.Netns,
		// As skel reads it for every plugin.
		NetNSOverride: a.NetnsOverride == "1" || strings.EqualFold(a.NetnsOverride, "true"),
		IfName:        a.IfName,
		Args:          args,
		RuntimeConfig: conf.RuntimeConfig,
		CNIVersion:    conf.CNIVersion,
	}, nil
}

// logRotation is the config's logOptions (Multus's: megabytes and days).
func logRotation(o *config.LogOptions) logfile.Rotation {
	if o == nil {
		return logfile.Rotation{}
	}
	return logfile.Rotation{
		MaxBytes:   int64(o.MaxSize) << 20,
		MaxBackups: o.MaxBackups,
		MaxAge:     time.Duration(o.MaxAge) * 24 * time.Hour,
		Compress:   o.Compress,
	}
}

// openLog is o.Log, else logFile or stderr, never stdout (the result's).
func (o Options) openLog(conf *config.Config) (*slog.Logger, func(), error) {
	if o.Log != nil {
		return o.Log, func() {}, nil
	}
	level, err := conf.Level()
	if err != nil {
		return nil, nil, err
	}
	var w io.Writer = os.Stderr
	closer := func() {}
	if conf.LogFile != "" {
		f, err := logfile.Open(conf.LogFile, logRotation(conf.LogOptions))
		if err != nil {
			return nil, nil, err
		}
		w, closer = f, func() { f.Close() }
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), closer, nil
}

// bootIDFile holds the kernel's ID of this boot, in every namespace.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// BootID is the running kernel's boot ID, or "" when it cannot be read.
func BootID() string {
	b, err := os.ReadFile(bootIDFile)
	if id := strings.TrimSpace(string(b)); err == nil && len(id) == record.BootIDLen {
		return id
	}
	return ""
}
