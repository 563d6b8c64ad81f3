// Package nodestate publishes what a node's plexus has installed and
// enforces in the PlexusNode named after the node (plexusapi), for
// `kubectl get plexusnodes` and `plexusctl explain --node`.
//
// A Reporter assembles the status from providers and writes only a
// change, by server-side apply to the status subresource, after events
// (Notify) and a slow resync; it never polls the API.
package nodestate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	applyv1alpha1 "github.com/plexus-cni/plexus/core/api/client/applyconfiguration/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/extensions"
)

// Field managers of the two agents that write a PlexusNode.
const (
	ManagerPlexusd   = "plexusd"
	ManagerInstaller = "plexus-installer"
)

// Modes, as PlexusNodeStatus.Mode.
const (
	ModeThick = "thick"
	ModeThin  = "thin"
)

// Defaults of Options.
const (
	DefaultMinInterval = 5 * time.Second
	DefaultResync      = 5 * time.Minute
	DefaultMaxBackoff  = 2 * time.Minute
	DefaultCallTimeout = 10 * time.Second
	firstBackoff       = time.Second
)

// Install is what the node's installer found on its last pass.
type Install struct {
	// ConfigInstalled: plexus's CNI config is at ConfigPath.
	ConfigInstalled bool
	ConfigPath      string
	// DefaultNetwork is the default network's name, DefaultNetworkFile
	// its config; both empty until found.
	DefaultNetwork     string
	DefaultNetworkFile string
	// Plugins are the types both configs name, looked up in BinDirs.
	Plugins []string
	BinDirs []string
}

// Options configure a Reporter.
type Options struct {
	// Client writes the PlexusNode named Node.
	Client versioned.Interface
	Node   string
	// FieldManager is ManagerPlexusd or ManagerInstaller.
	FieldManager string
	// Mode is ModeThick or ModeThin; Version is plexus's release.
	Mode    string
	Version string
	// Install reads the installer's last pass; required.
	Install func() Install
	// Policy, Extensions and Config (Settings) are reported when set.
	Policy     func() *plexusapi.NodePolicy
	Extensions func() []extensions.ModuleState
	Config     *config.Config
	// MinInterval is the least time between two writes; Resync how often
	// the state is assembled without a Notify; MaxBackoff caps the retry
	// of a failed write; CallTimeout bounds each request.
	MinInterval time.Duration
	Resync      time.Duration
	MaxBackoff  time.Duration
	CallTimeout time.Duration
	Log         *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
}

// Reporter publishes one node's status.
type Reporter struct {
	o    Options
	kick chan struct{}
	// last is the status last published, times cleared; nil before a write.
	last *plexusapi.PlexusNodeStatus
	// readySince is when Ready last changed status, as published.
	readySince metav1.Time
}

// New checks the options and fills in defaults.
func New(o Options) (*Reporter, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("node state reporter: no API client")
	case o.Node == "":
		return nil, errors.New("node state reporter: no node name")
	case o.Install == nil:
		return nil, errors.New("node state reporter: no install state")
	case o.Mode != ModeThick && o.Mode != ModeThin:
		return nil, fmt.Errorf("node state reporter: mode %q: want %s or %s", o.Mode, ModeThick, ModeThin)
	case o.FieldManager == "":
		return nil, errors.New("node state reporter: no field manager")
	}
	// Unset or negative: the default.
	o.MinInterval = cmp.Or(max(o.MinInterval, 0), DefaultMinInterval)
	o.Resync = cmp.Or(max(o.Resync, 0), DefaultResync)
	o.MaxBackoff = cmp.Or(max(o.MaxBackoff, 0), DefaultMaxBackoff)
	o.CallTimeout = cmp.Or(max(o.CallTimeout, 0), DefaultCallTimeout)
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reporter{o: o, kick: make(chan struct{}, 1)}, nil
}

// Notify asks for the state to be assembled again; it never blocks.
func (r *Reporter) Notify() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Status assembles the current status, Updated unset.
func (r *Reporter) Status() plexusapi.PlexusNodeStatus {
	in := r.o.Install()
	st := plexusapi.PlexusNodeStatus{
		Mode: r.o.Mode, Version: r.o.Version,
		ConfigInstalled: in.ConfigInstalled, ConfigPath: in.ConfigPath,
		DefaultNetwork: in.DefaultNetwork, DefaultNetworkFile: in.DefaultNetworkFile,
		MissingPlugins: MissingPlugins(in.Plugins, in.BinDirs),
	}
	if r.o.Policy != nil {
		if p := r.o.Policy(); p != nil {
			pol := *p
			pol.Error = names.Truncate(pol.Error, maxErrorBytes)
			st.Policy = &pol
		}
	}
	if r.o.Extensions != nil {
		mods := r.o.Extensions()
		st.Extensions = make([]plexusapi.NodeExtension, 0, min(len(mods), MaxExtensions))
		for _, m := range mods[:min(len(mods), MaxExtensions)] {
			st.Extensions = append(st.Extensions, plexusapi.NodeExtension{
				Name: m.Name, Version: m.Version, Path: m.Path, SHA256: m.SHA256,
				Loaded: m.Loaded, Error: names.Truncate(m.Err, maxErrorBytes),
			})
		}
	}
	if r.o.Config != nil {
		st.Settings = Settings(r.o.Config, in.DefaultNetworkFile)
	}
	st.Conditions = []metav1.Condition{ready(&st)}
	return st
}

// The CRD's bounds: a longer error or list would fail every write.
const (
	MaxExtensions = plexusapi.MaxExtensions
	maxErrorBytes = plexusapi.MaxErrorBytes
)

// statusKey is the one item of the reporter's queue: the node's status.
const statusKey = "status"

// Run publishes the status until ctx ends: after the first Notify (so
// nothing half-known is written), then after each Notify and Resync when
// it changed. A workqueue holds the pending pass, spaces writes by
// MinInterval and retries a failed one with backoff up to MaxBackoff.
func (r *Reporter) Run(ctx context.Context) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](firstBackoff, r.o.MaxBackoff),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "plexusnode-" + r.o.Node})
	go r.feed(ctx, q)
	var lastWrite time.Time
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		r.pass(ctx, q, key, &lastWrite)
		q.Done(key)
	}
}

// feed queues a pass on each Notify and Resync until ctx ends.
func (r *Reporter) feed(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) {
	defer q.ShutDown()
	resync := time.NewTicker(r.o.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-resync.C:
		}
		q.Add(statusKey)
	}
}

// pass writes the status if it changed, MinInterval after the last write.
func (r *Reporter) pass(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], key string, lastWrite *time.Time) {
	if wait := r.o.MinInterval - r.o.Now().Sub(*lastWrite); wait > 0 {
		q.AddAfter(key, wait)
		return
	}
	wrote, err := r.PublishIfChanged(ctx)
	switch {
	case errors.Is(err, ErrNoKind):
		// Retrying cannot help: wait for the next change or resync.
		r.o.Log.Info("not reporting the node's state until the next change", "node", r.o.Node, "err", err)
	case err != nil:
		r.o.Log.Warn("reporting the node's state failed; retrying", "node", r.o.Node, "retry", q.NumRequeues(key)+1, "err", err)
		q.AddRateLimited(key)
		return
	case wrote:
		*lastWrite = r.o.Now()
	}
	q.Forget(key)
}

// PublishIfChanged writes the status if it changed and reports whether.
func (r *Reporter) PublishIfChanged(ctx context.Context) (bool, error) {
	st := r.Status()
	if r.last != nil && reflect.DeepEqual(*r.last, st) {
		return false, nil
	}
	published := st
	now := metav1.NewTime(r.o.Now().Truncate(time.Second))
	published.Updated = now
	since := r.readySince
	if r.last == nil || r.last.Conditions[0].Status != st.Conditions[0].Status {
		since = now
	}
	published.Conditions = []metav1.Condition{st.Conditions[0]}
	published.Conditions[0].LastTransitionTime = since
	if err := r.apply(ctx, published); err != nil {
		return false, err
	}
	r.last, r.readySince = &st, since
	r.o.Log.Info("reported the node's state", "plexusnode", r.o.Node, "configInstalled", st.ConfigInstalled,
		"defaultNetwork", st.DefaultNetwork, "missingPlugins", st.MissingPlugins)
	return true, nil
}

// Reasons of the Ready condition.
const (
	ReasonReady              = "Ready"
	ReasonConfigNotInstalled = "ConfigNotInstalled"
	ReasonNoDefaultNetwork   = "DefaultNetworkNotFound"
	ReasonPluginsMissing     = "PluginsMissing"
	ReasonPolicyRefused      = "PolicyRefused"
	ReasonExtensionFailed    = "ExtensionNotLoaded"
)

// ready is the Ready condition of st: False with the first thing that
// keeps the node from working, in the order an operator fixes them.
func ready(st *plexusapi.PlexusNodeStatus) metav1.Condition {
	c := metav1.Condition{Type: plexusapi.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case !st.ConfigInstalled:
		c.Reason, c.Message = ReasonConfigNotInstalled, "plexus's CNI config is not installed"
	case st.DefaultNetwork == "":
		c.Reason, c.Message = ReasonNoDefaultNetwork, "no cluster-wide default network found"
	case len(st.MissingPlugins) > 0:
		c.Reason, c.Message = ReasonPluginsMissing, "CNI plugins missing from the bin dirs: "+strings.Join(st.MissingPlugins, ", ")
	case st.Policy != nil && st.Policy.Error != "":
		c.Reason, c.Message = ReasonPolicyRefused, fmt.Sprintf("generation %d of %s refused: %s", st.Policy.ObservedGeneration, st.Policy.Object, st.Policy.Error)
	default:
		for _, e := range st.Extensions {
			if !e.Loaded {
				c.Reason, c.Message = ReasonExtensionFailed, fmt.Sprintf("extension %s not loaded: %s", e.Path, e.Error)
				return c
			}
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonReady, "plexus is installed and enforces its policy"
	}
	return c
}

// Settings are the values of c that decide a plan; found is the default network's file.
func Settings(c *config.Config, found string) *plexusapi.NodeSettings {
	compat := config.CompatOff
	if c.MultusCompat() {
		compat = config.CompatMultus
	}
	return &plexusapi.NodeSettings{
		ClusterNetwork: cmp.Or(c.ClusterNetwork, found), Compat: compat,
		SystemNamespace:  cmp.Or(c.SystemNamespace, config.DefaultSystemNamespace),
		StrictSelection:  c.StrictSelection,
		DefaultNetworks:  bounded(c.DefaultNetworks),
		SystemNamespaces: bounded(c.SystemNamespaces),
	}
}

// bounded keeps a list within the CRD's bound.
func bounded(l []string) []string {
	return append([]string(nil), l[:min(len(l), maxSettingsItems)]...)
}

const maxSettingsItems = 64

// MaxPlugins bounds the plugin types checked (missingPlugins.maxItems).
const MaxPlugins = 64

// pluginName is a CNI plugin type that names a file in a bin dir.
var pluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// IsPluginName reports whether t can name a plugin file in a bin dir.
func IsPluginName(t string) bool { return pluginName.MatchString(t) }

// MissingPlugins are the types, sorted, in none of binDirs (MaxPlugins checked).
func MissingPlugins(types, binDirs []string) []string {
	var missing []string
	seen := map[string]bool{}
	for _, t := range types {
		if seen[t] || !IsPluginName(t) || len(seen) >= MaxPlugins {
			continue
		}
		seen[t] = true
		if !present(t, binDirs) {
			missing = append(missing, t)
		}
	}
	slices.Sort(missing)
	return missing
}

func present(plugin string, binDirs []string) bool {
	return slices.ContainsFunc(binDirs, func(d string) bool {
		if d == "" {
			return false
		}
		fi, err := os.Stat(filepath.Join(d, plugin))
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	})
}

// apply writes st by server-side apply of the PlexusNode's status. The
// status subresource does not create an object, so the first write
// applies the bare object first.
func (r *Reporter) apply(ctx context.Context, st plexusapi.PlexusNodeStatus) error {
	ac, err := statusApply(r.o.Node, st)
	if err != nil {
		return err
	}
	err = r.applyStatus(ctx, ac)
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := r.create(ctx); err != nil {
		return err
	}
	return r.applyStatus(ctx, ac)
}

func (r *Reporter) applyStatus(ctx context.Context, ac *applyv1alpha1.PlexusNodeApplyConfiguration) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	_, err := r.o.Client.PlexusV1alpha1().PlexusNodes().ApplyStatus(ctx, ac, r.applyOptions())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("applying the status of PlexusNode %s: %w", r.o.Node, err)
	}
	return err
}

func (r *Reporter) create(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	_, err := r.o.Client.PlexusV1alpha1().PlexusNodes().Apply(ctx, applyv1alpha1.PlexusNode(r.o.Node), r.applyOptions())
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("creating PlexusNode %s: %w (%w)", r.o.Node, ErrNoKind, err)
	}
	if err != nil {
		return fmt.Errorf("creating PlexusNode %s: %w", r.o.Node, err)
	}
	return nil
}

// ErrNoKind: the PlexusNode CRD (deploy/base/plexus-crds.yaml) is missing.
var ErrNoKind = errors.New("the cluster has no PlexusNode kind")

// applyOptions: the agent, the only writer, takes over others' fields.
func (r *Reporter) applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: r.o.FieldManager, Force: true}
}

// statusApply is the apply configuration of st, converted through JSON
// (the generated one has its form): a zero time becomes an absent field,
// not a null that apply would read as "remove".
func statusApply(node string, st plexusapi.PlexusNodeStatus) (*applyv1alpha1.PlexusNodeApplyConfiguration, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("PlexusNode %s status: %w", node, err)
	}
	var sac applyv1alpha1.PlexusNodeStatusApplyConfiguration
	if err := json.Unmarshal(raw, &sac); err != nil {
		return nil, fmt.Errorf("PlexusNode %s status: %w", node, err)
	}
	return applyv1alpha1.PlexusNode(node).WithStatus(&sac), nil
}
