package plexusd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/extensions"
)

// metrics are plexusd's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	inflight       prometheus.Gauge
	attachments    *prometheus.CounterVec
	denials        *prometheus.CounterVec
	decisions      prometheus.Histogram
	extErrors      *prometheus.CounterVec
	apiErrors      *prometheus.CounterVec
	publish        prometheus.Histogram // network-status writes (publish.go)
	cacheMisses    *prometheus.CounterVec
	policyReloads  *prometheus.CounterVec
	policyLoaded   prometheus.Gauge
	policyRevision *prometheus.GaugeVec // 1 for the revision in force, its only series
	ignoredKeys    *prometheus.CounterVec
	podResources   *prometheus.CounterVec
	gcCollected    prometheus.Counter
	gcPasses       *prometheus.CounterVec
	statusRepaired prometheus.Counter // repair.go
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	// The daemon's own health: memory, garbage collection, threads, CPU.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := promauto.With(reg)
	return &metrics{
		reg:      reg,
		requests: f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_requests_total", Help: "CNI calls served, by command and result (ok or the CNI error code)."}, []string{"command", "result"}),
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "plexus_request_duration_seconds", Help: "Time to serve a CNI call, by command.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"command"}),
		inflight:    f.NewGauge(prometheus.GaugeOpts{Name: "plexus_inflight_requests", Help: "CNI calls being served."}),
		attachments: f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_attachments_total", Help: "Delegate ADDs (one per network attachment), by result."}, []string{"result"}),
		denials:     f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_policy_denials_total", Help: "s7.4 policy denials, by reason code."}, []string{"code"}),
		decisions: f.NewHistogram(prometheus.HistogramOpts{
			Name: "plexus_policy_decision_duration_seconds", Help: "Time to make one s7.4 policy decision (one attachment), building the input included.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 12),
		}),
		extErrors: f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_extension_errors_total", Help: "Extension hook failures, rejections and timeouts, by module and kind."}, []string{"module", "kind"}),
		apiErrors: f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_api_errors_total", Help: "Failed Kubernetes API calls, by call."}, []string{"call"}),
		publish: f.NewHistogram(prometheus.HistogramOpts{
			Name: "plexus_status_publish_duration_seconds", Help: "Time to write one pod's network-status annotation (a PATCH of the pod), failures included.",
			Buckets: prometheus.ExponentialBuckets(250e-6, 2, 14),
		}),
		cacheMisses:   f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_cache_misses_total", Help: "Reads the informer caches could not answer (a direct GET followed), by kind."}, []string{"kind"}),
		policyReloads: f.NewCounterVec(prometheus.CounterOpts{Name: "plexus_policy_reloads_total", Help: "Policy reloads after a change, by result."}, []string{"result"}),
		ignoredKeys: f.NewCounterVec(prometheus.CounterOpts{
			Name: "plexus_selection_ignored_keys_total", Help: "Selection annotation keys an ADD ignored (also listed in the attachment's network-status under io.plexus.ignored), by key; keys plexus does not know are counted as \"other\" or \"reverse-domain\".",
		}, []string{"key"}),
		policyLoaded: f.NewGauge(prometheus.GaugeOpts{
			Name: "plexus_policy_last_reload_ok", Help: "1 when the policy files in place are the ones in use, 0 when the last change failed to compile and the previous policy is kept.",
		}),
		policyRevision: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "plexus_policy_revision_info", Help: "1 for the policy in force: the AttachmentPolicy followed, the source (object, defaults or none) and the revision.",
		}, []string{"object", "source", "revision"}),
		podResources: f.NewCounterVec(prometheus.CounterOpts{
			Name: "plexus_pod_resources_calls_total", Help: "Calls to kubelet's pod-resources API (at most one per ADD of a pod with device networks), by method.",
		}, []string{"method"}),
		gcCollected: f.NewCounter(prometheus.CounterOpts{
			Name: "plexus_gc_collected_containers_total", Help: "Containers whose sandbox the runtime no longer lists that plexusd detached from their attachment record (criSocket set).",
		}),
		statusRepaired: f.NewCounter(prometheus.CounterOpts{
			Name: "plexus_status_repaired_total",
			Help: "network-status annotations a restarted plexusd wrote from attachment records (its predecessor answered the ADD but did not publish, or the status held prefixes in ips).",
		}),
		gcPasses: f.NewCounterVec(prometheus.CounterOpts{
			Name: "plexus_gc_passes_total", Help: "Passes of the stale record collection, by result: ok, cri_failed (the runtime did not answer: nothing collected) or incomplete (some records could not be read or detached).",
		}, []string{"result"}),
	}
}

// handler counts and times every call.
func (m *metrics) handler(next daemon.Handler) daemon.Handler {
	return func(ctx context.Context, c *daemon.Call) *daemon.Reply {
		cmd := c.Command()
		m.inflight.Inc()
		start := time.Now()
		r := next(ctx, c)
		m.inflight.Dec()
		m.latency.WithLabelValues(cmd).Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(cmd, result(r)).Inc()
		return r
	}
}

func result(r *daemon.Reply) string {
	if !r.Failed {
		return "ok"
	}
	var e struct {
		Code uint `json:"code"`
	}
	_ = json.Unmarshal(r.Stdout, &e)
	return strconv.FormatUint(uint64(e.Code), 10)
}

// countingCNI counts delegate ADDs, recording their types in seen (if set).
type countingCNI struct {
	libcni.CNI
	m    *metrics
	seen *delegateTypes
}

func (c countingCNI) AddNetworkList(ctx context.Context, l *libcni.NetworkConfigList, rt *libcni.RuntimeConf) (types.Result, error) {
	c.seen.add(l)
	res, err := c.CNI.AddNetworkList(ctx, l, rt)
	result := "ok"
	if err != nil {
		result = "failed"
	}
	c.m.attachments.WithLabelValues(result).Inc()
	return res, err
}

// warningDropper is the extension host (extensions.Host.DroppedWarnings).
type warningDropper interface{ DroppedWarnings() uint64 }

// countDroppedWarnings counts the warnings past one call's cap, never logged.
func (m *metrics) countDroppedWarnings(w warningDropper) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "plexus_extension_warnings_dropped_total",
		Help: "Warnings extension modules returned past the cap of one call, counted instead of relayed.",
	}, func() float64 { return float64(w.DroppedWarnings()) }))
}

// moduleLister is the extension host's view of its modules.
type moduleLister interface {
	Modules() []extensions.ModuleState
}

// reportModules logs and exports every module's state.
func (m *metrics) reportModules(l moduleLister, log *slog.Logger) {
	loaded := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "plexus_extension_module_loaded",
		Help: "1 for each configured extension module plexusd loaded, 0 for one it refused (its reason is in plexusd's log and the PlexusNode's status).",
	}, []string{"module", "version", "sha256"})
	m.reg.MustRegister(loaded)
	for _, st := range l.Modules() {
		v := 0.0
		if st.Loaded {
			v = 1
			log.Info("extension module loaded", "module", st.Name, "version", st.Version, "path", st.Path, "sha256", st.SHA256)
		} else {
			log.Error("extension module refused; the other modules serve", "module", st.Name, "path", st.Path, "error", st.Err)
		}
		loaded.WithLabelValues(st.Name, st.Version, st.SHA256).Set(v)
	}
}

// countingExtensions counts hook failures by module.
type countingExtensions struct {
	prep pipeline.Preparer
	enr  pipeline.Enricher
	m    *metrics
}

func (e countingExtensions) Prepare(ctx context.Context, req *pipeline.PrepareRequest) error {
	err := e.prep.Prepare(ctx, req)
	e.count(err)
	return err
}

func (e countingExtensions) Enrich(ctx context.Context, req *pipeline.EnrichRequest) error {
	err := e.enr.Enrich(ctx, req)
	e.count(err)
	return err
}

func (e countingExtensions) count(err error) {
	var he *extensions.HookError
	if err == nil || !errors.As(err, &he) {
		return
	}
	kind := "failed"
	switch {
	case he.Rejected:
		kind = "rejected"
	case errors.Is(err, context.DeadlineExceeded):
		kind = "timeout"
	}
	e.m.extErrors.WithLabelValues(he.Module, kind).Inc()
}

// countingSource counts failed API calls; not-found is an answer, not an error.
type countingSource struct {
	source.Source
	m *metrics
}

func (s countingSource) Pod(ctx context.Context, ns, name string) (*source.Pod, error) {
	p, err := s.Source.Pod(ctx, ns, name)
	s.count("get pod", err)
	return p, err
}

func (s countingSource) NAD(ctx context.Context, ns, name string) (*source.NAD, error) {
	n, err := s.Source.NAD(ctx, ns, name)
	s.count("get network-attachment-definition", err)
	return n, err
}

func (s countingSource) PublishStatus(ctx context.Context, pod *source.Pod, doc []byte) error {
	start := time.Now()
	err := s.Source.PublishStatus(ctx, pod, doc)
	s.m.publish.Observe(time.Since(start).Seconds())
	s.count("patch pod", err)
	return err
}

// Event, FreshPod and NamespaceLabels reach the source's optional ones.
func (s countingSource) Event(ctx context.Context, pod *source.Pod, typ source.EventType, reason, msg string) {
	if r, ok := s.Source.(source.EventRecorder); ok {
		r.Event(ctx, pod, typ, reason, msg)
	}
}

func (s countingSource) FreshPod(ctx context.Context, ns, name string) (*source.Pod, error) {
	f, ok := s.Source.(source.FreshPodGetter)
	if !ok {
		return s.Pod(ctx, ns, name)
	}
	p, err := f.FreshPod(ctx, ns, name)
	s.count("get pod", err)
	return p, err
}

func (s countingSource) NamespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	l, ok := s.Source.(source.NamespaceLabeler)
	if !ok {
		return nil, nil
	}
	labels, err := l.NamespaceLabels(ctx, ns)
	s.count("get namespace", err)
	return labels, err
}

func (s countingSource) count(call string, err error) {
	if err != nil && !errors.Is(err, source.ErrNotFound) {
		s.m.apiErrors.WithLabelValues(call).Inc()
	}
}

// ignored counts one ignored selection key; labels are a fixed set.
func (m *metrics) ignored(key string) {
	label := "other"
	switch {
	case selection.IsCompatKey(key):
		label = key
	case strings.Contains(key, "."):
		label = "reverse-domain"
	}
	m.ignoredKeys.WithLabelValues(label).Inc()
}
