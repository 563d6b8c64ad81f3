package plexusd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/plexus-cni/plexus/cmd/internal/cniargs"
	"github.com/plexus-cni/plexus/cmd/internal/cniplugin"
	"github.com/plexus-cni/plexus/cmd/internal/cri"
	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/cmd/internal/install"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/source/kube"
)

// Dynamic attachments' timing: the first retry of a transient failure
// (each try may detach and restore interfaces: no tight loop), the longest
// wait between retries, and how often every pod is looked at again.
const (
	retryBase   = 5 * time.Second
	retryMax    = 5 * time.Minute
	resyncEvery = time.Minute
	workers     = 4
)

// podCache is what the reconciler reads of plexusd's pod cache.
type podCache interface {
	CachedPod(namespace, name string) *source.Pod
	PodKeys() []string
}

// conditionSetter writes the pod condition (the Kubernetes source).
type conditionSetter interface {
	SetPodCondition(ctx context.Context, pod *source.Pod, c kube.PodCondition) error
}

// reconciler applies changes of running pods' selection annotations
// (dynamic attachments) through pipeline.Update, serialized per pod by the
// queue and, with its CNI calls, by the container lock (s7.3).
type reconciler struct {
	pods    podCache
	records *record.Store
	netns   func(ctx context.Context, sandboxID, podUID string) (string, error) // the CRI's
	update  func(ctx context.Context, req *pipeline.Request, pod *source.Pod) (*pipeline.Change, error)
	conds   conditionSetter // nil: no condition is written
	parse   selection.ParseOptions
	// publishing reports a pod's status or events still queued; nil: none.
	publishing func(podKey string) bool
	queue      workqueue.TypedRateLimitingInterface[string]
	log        *slog.Logger

	mu sync.Mutex
	// byUID indexes the records by pod UID as of the directory's indexTime.
	byUID     map[string]string
	indexTime time.Time
	indexedAt time.Time
	// refused holds, per pod UID, the annotation a permanent failure was for.
	refused map[string]string
}

func newReconciler(pods podCache, records *record.Store, log *slog.Logger) *reconciler {
	return &reconciler{
		pods: pods, records: records, log: log, refused: map[string]string{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBase, retryMax)),
	}
}

// enqueueAll looks at every cached pod: at start and periodically.
func (r *reconciler) enqueueAll() {
	live := map[string]bool{}
	for _, k := range r.pods.PodKeys() {
		if ns, name, ok := strings.Cut(k, "/"); ok {
			if p := r.pods.CachedPod(ns, name); p != nil {
				live[p.UID] = true
			}
		}
		if r.queue.NumRequeues(k) == 0 { // not waiting out a backoff
			r.queue.Add(k)
		}
	}
	r.mu.Lock() // forget the refusals of pods that are gone
	maps.DeleteFunc(r.refused, func(uid, _ string) bool { return !live[uid] })
	r.mu.Unlock()
}

// run works the queue until ctx ends.
func (r *reconciler) run(ctx context.Context, synced func(context.Context) bool) {
	defer r.queue.ShutDown()
	if !synced(ctx) {
		return
	}
	r.log.Info("dynamic attachments: reconciling this node's running pods")
	r.enqueueAll()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	t := time.NewTicker(resyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.queue.ShutDown()
			wg.Wait()
			return
		case <-t.C:
			r.enqueueAll()
		}
	}
}

func (r *reconciler) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if r.reconcile(ctx, key) {
		r.queue.AddRateLimited(key)
	} else {
		r.queue.Forget(key)
	}
	return true
}

// reconcile applies a change of one pod's selection; it reports whether to retry.
func (r *reconciler) reconcile(ctx context.Context, key string) (retry bool) {
	ns, name, _ := strings.Cut(key, "/")
	pod := r.pods.CachedPod(ns, name)
	if pod == nil {
		return false
	}
	if r.publishing != nil && r.publishing(key) {
		// The ADD's own status is on its way: read now, the pod would look
		// stale and the queued (enriched) status be replaced. Look later.
		return true
	}
	ann := pod.Annotations[selection.Annotation]
	if r.wasRefused(pod.UID, ann) {
		return false
	}
	rec := r.recordOf(pod)
	if rec == nil || !pipeline.NeedsUpdate(rec, pod, r.parse) {
		return false
	}
	path, err := r.netns(ctx, rec.ContainerID, sandboxUID(pod))
	if errors.Is(err, cri.ErrNotFound) || errors.Is(err, cri.ErrNotReady) {
		return false // stopping or gone: its DEL undoes what it has
	}
	if err != nil {
		return r.failed(ctx, pod, ann, fmt.Errorf("finding the pod's network namespace: %w", err))
	}
	ch, err := r.update(ctx, &pipeline.Request{ContainerID: rec.ContainerID, NetNS: path}, pod)
	switch {
	case errors.Is(err, pipeline.ErrNoRecord), errors.Is(err, pipeline.ErrNotSettled):
		return false
	case err != nil:
		return r.failed(ctx, pod, ann, err)
	}
	r.succeeded(ctx, pod, ch)
	return false
}

// recordOf finds the record of the pod's sandbox through an index by pod
// UID, rebuilt when the records directory changed, so looking at every
// pod does not read every record for each.
func (r *reconciler) recordOf(pod *source.Pod) *record.Record {
	if rec := r.indexed(pod); rec != nil {
		return rec
	}
	fi, err := os.Stat(r.records.Dir)
	if err != nil {
		return nil
	}
	// Directory times are coarse (a clock tick): an index built within a
	// second of the last change is not trusted to have seen it.
	r.mu.Lock()
	fresh := fi.ModTime().Equal(r.indexTime) && r.indexedAt.Sub(r.indexTime) > time.Second
	r.mu.Unlock()
	if fresh {
		return nil
	}
	ids, err := r.records.List()
	if err != nil {
		r.log.Warn("dynamic attachments: listing records", "err", err)
		return nil
	}
	scanned := time.Now()
	byUID := map[string]string{}
	for _, id := range ids {
		if rec, err := r.records.Load(id); err == nil && rec != nil && rec.Pod != nil {
			byUID[rec.Pod.UID] = id
		}
	}
	r.mu.Lock()
	r.byUID, r.indexTime, r.indexedAt = byUID, fi.ModTime(), scanned
	r.mu.Unlock()
	return r.indexed(pod)
}

// indexed is the indexed record of the pod, if it is still the pod's.
func (r *reconciler) indexed(pod *source.Pod) *record.Record {
	r.mu.Lock()
	id, ok := r.byUID[pod.UID]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	rec, err := r.records.Load(id)
	if err != nil || rec == nil || rec.Pod == nil || rec.Pod.UID != pod.UID || rec.Pod.Namespace != pod.Namespace || rec.Pod.Name != pod.Name {
		return nil
	}
	return rec
}

// sandboxUID is the UID the runtime knows the pod by (a static pod's mirror's).
func sandboxUID(pod *source.Pod) string {
	return cmp.Or(pod.Annotations[pipeline.MirrorAnnotation], pod.UID)
}

func (r *reconciler) wasRefused(uid, ann string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.refused[uid]
	return ok && prev == ann
}

// failed reports a change not made in the pod condition (the pipeline
// sent the event) and remembers a permanent failure, so the same
// annotation is not tried again; it reports whether to retry.
func (r *reconciler) failed(ctx context.Context, pod *source.Pod, ann string, err error) (transient bool) {
	reason, permanent := failure(err)
	r.log.Warn("dynamic attachments: change not applied", "pod", pod.Ref(), "transient", !permanent, "err", err)
	if permanent {
		r.mu.Lock()
		r.refused[pod.UID] = ann
		r.mu.Unlock()
	}
	r.condition(ctx, pod, kube.PodCondition{Type: plexusapi.PodConditionNetworkAttachments, Status: "False", Reason: reason, Message: err.Error()})
	return !permanent
}

func (r *reconciler) succeeded(ctx context.Context, pod *source.Pod, ch *pipeline.Change) {
	r.mu.Lock()
	delete(r.refused, pod.UID)
	r.mu.Unlock()
	if len(ch.Attached) == 0 && len(ch.Detached) == 0 {
		return
	}
	r.log.Info("dynamic attachments: pod changed", "pod", pod.Ref(), "attached", ch.Attached, "detached", ch.Detached)
	msg := "attached [" + strings.Join(ch.Attached, ", ") + "], detached [" + strings.Join(ch.Detached, ", ") + "]"
	r.condition(ctx, pod, kube.PodCondition{Type: plexusapi.PodConditionNetworkAttachments, Status: "True", Reason: "Applied", Message: msg})
}

func (r *reconciler) condition(ctx context.Context, pod *source.Pod, c kube.PodCondition) {
	if r.conds == nil {
		return
	}
	if err := r.conds.SetPodCondition(ctx, pod, c); err != nil {
		r.log.Warn("dynamic attachments: setting the pod condition", "pod", pod.Ref(), "err", err)
	}
}

// failures name the condition's reason by CNI error code; permanent ones are not retried.
var failures = map[uint]struct {
	reason    string
	permanent bool
}{
	codes.InvalidSelection:  {"InvalidSelection", true},
	codes.PolicyDenied:      {"PolicyDenied", true},
	codes.Extension:         {"ExtensionRejected", true},
	codes.NotHonored:        {"RequestNotHonored", true},
	codes.InterfaceConflict: {"InterfaceConflict", true},
	codes.PodLookup:         {"PodMismatch", true},
	codes.NetworkNotFound:   {"NetworkNotFound", false},
	codes.AttachFailed:      {"AttachFailed", false},
	codes.DetachFailed:      {"DetachFailed", false},
}

// failure is err's reason and whether it is permanent; else "Failed".
func failure(err error) (reason string, permanent bool) {
	var te *types.Error
	if errors.As(err, &te) {
		if f, ok := failures[te.Code]; ok {
			return f.reason, f.permanent
		}
	}
	return "Failed", false
}

// startDynamic starts the reconciler when the config asks for dynamic
// attachments. The returned wrapper queues each ADD's pod: its annotation
// may have changed while the ADD ran.
func (d *Daemon) startDynamic(ctx context.Context) (func(daemon.Handler) daemon.Handler, error) {
	none := func(h daemon.Handler) daemon.Handler { return h }
	if !d.conf.DynamicAttachments {
		return none, nil
	}
	if d.cache == nil {
		return nil, errors.New(`plexusd config "dynamicAttachments" needs the Kubernetes source (kubeconfig or in-cluster), not manifests`)
	}
	client, err := d.criClient()
	if err != nil {
		return nil, err
	}
	log := d.o.Log.With("cmd", "dynamic")
	p := d.daemonPipeline(log)
	p.Source, p.Stages = d.src, d.stages
	r := newReconciler(d.cache, p.Records, log)
	r.netns, r.update, r.conds, r.parse, r.publishing = client.NetNS, p.Update, d.cache, p.ParseOptions(), d.pub.pending
	if err := d.cache.OnPodChange(selection.Annotation, r.queue.Add); err != nil {
		return nil, err
	}
	go r.run(ctx, d.cache.WaitForSync)
	d.o.Log.Info("dynamic attachments on", "criSocket", d.criSocket())
	return func(next daemon.Handler) daemon.Handler {
		return func(ctx context.Context, c *daemon.Call) *daemon.Reply {
			reply := next(ctx, c)
			if c.Command() == "ADD" && !reply.Failed {
				if key := podKey(c.CmdArgs().Args); key != "" {
					r.queue.Add(key)
				}
			}
			return reply
		}
	}, nil
}

// criSocket is the runtime's CRI socket: the config's, else containerd's.
func (d *Daemon) criSocket() string { return cmp.Or(d.conf.CRISocket, cri.DefaultSocket) }

// criClient is plexusd's one CRI client, closed with plexusd.
func (d *Daemon) criClient() (*cri.Client, error) {
	if d.cri != nil {
		return d.cri, nil
	}
	client, err := cri.NewInRoot(d.o.DelegateRoot, d.criSocket())
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { _ = client.Close() })
	d.cri = client
	return client, nil
}

// daemonPipeline is a pipeline for plexusd's own work, not a CNI call's.
func (d *Daemon) daemonPipeline(log *slog.Logger) *pipeline.Pipeline {
	o := cniplugin.Options{DelegateRoot: d.o.DelegateRoot, Boot: d.boot, WrapCNI: func(c libcni.CNI) libcni.CNI { return countingCNI{CNI: c, m: d.m} }}
	return o.Pipeline(d.conf, delegatePaths(d.conf), log)
}

// delegatePaths are binDir, then install.DefaultBinDir (only CNI calls carry CNI_PATH).
func delegatePaths(conf *config.Config) []string {
	if conf.BinDir != "" {
		return []string{conf.BinDir, install.DefaultBinDir}
	}
	return []string{install.DefaultBinDir}
}

// podKey is "namespace/name" from CNI_ARGS, "" without them.
func podKey(args string) string {
	p, _, err := cniargs.Load(args)
	if err != nil || p.K8S_POD_NAMESPACE == "" {
		return ""
	}
	return p.Ref()
}
