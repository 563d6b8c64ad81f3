// Package follow feeds one named AttachmentPolicy to a node's
// revision.Syncer through an informer and records each attempt as an Event
// on the node's own PlexusNode, whose status reports what it enforces
// (NodePolicy): nothing a node writes lands in the object every node
// watches. plexusd (thick) and the installer (thin) run it.
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	"github.com/plexus-cni/plexus/core/api/client/informers/externalversions"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Event reasons on the node's PlexusNode.
const (
	ReasonActivated = "PolicyActivated"
	ReasonRejected  = "PolicyRejected"
)

// resync is how often the informer replays the object from its cache.
const resync = 10 * time.Minute

// Options configure Run.
type Options struct {
	Syncer *revision.Syncer
	Client versioned.Interface
	Node   string
	// Recorder records Events on the node's PlexusNode; nil records none.
	Recorder record.EventRecorder
	// OnResult is called after each attempt, with its error (nil when the
	// revision in force is the object's, or deletion was handled).
	OnResult func(revision.Result, error)
	Log      *slog.Logger
}

// Watch runs the informer.
type Watch struct {
	o Options
}

// New checks the options.
func New(o Options) (*Watch, error) {
	if o.Syncer == nil || o.Client == nil || o.Node == "" {
		return nil, errors.New("policy watch: needs a syncer, an API client and the node name")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.OnResult == nil {
		o.OnResult = func(revision.Result, error) {}
	}
	return &Watch{o: o}, nil
}

// Run watches the object until ctx ends. Handlers run one at a time, in
// the informer's goroutine, so attempts never overlap.
func (w *Watch) Run(ctx context.Context) {
	name := w.o.Syncer.Name()
	f := externalversions.NewSharedInformerFactoryWithOptions(w.o.Client, resync,
		externalversions.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	si := f.Plexus().V1alpha1().AttachmentPolicies().Informer()
	_, err := si.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.apply(ctx, obj) },
		UpdateFunc: func(_, obj any) { w.apply(ctx, obj) },
		DeleteFunc: func(any) { w.deleted(ctx) },
	})
	if err != nil {
		w.o.Log.Error("policy watch", "err", err)
		return
	}
	go si.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), si.HasSynced) {
		return
	}
	// A deletion while this node was away is seen as an absent object.
	if _, exists, _ := si.GetStore().GetByKey(name); !exists {
		w.deleted(ctx)
	}
	<-ctx.Done()
}

func (w *Watch) apply(ctx context.Context, obj any) {
	p, ok := obj.(*plexusapi.AttachmentPolicy)
	if !ok {
		return
	}
	res, err := w.o.Syncer.Apply(ctx, p)
	w.o.OnResult(res, err)
	switch {
	case err != nil && res.Attempted:
		w.event(corev1.EventTypeWarning, ReasonRejected, "refused generation %d of %s; revision %s stays in force: %v", p.Generation, p.Name, res.State.Revision, err)
	case res.Changed:
		w.event(corev1.EventTypeNormal, ReasonActivated, "activated revision %s (generation %d of %s)", res.State.Revision, p.Generation, p.Name)
	}
}

func (w *Watch) deleted(ctx context.Context) {
	res, err := w.o.Syncer.Delete(ctx)
	w.o.OnResult(res, err)
	w.o.Log.Info("policy object absent", "object", w.o.Syncer.Name(), "source", res.State.Source, "revision", res.State.Revision)
}

// event records on the node's PlexusNode: each node's Events land on its
// own object, and the recorder aggregates and rate-limits repeats.
func (w *Watch) event(typ, reason, format string, args ...any) {
	if w.o.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: plexusapi.SchemeGroupVersion.String(), Kind: plexusapi.KindPlexusNode, Name: w.o.Node}
	w.o.Recorder.Event(ref, typ, reason, names.Truncate(fmt.Sprintf(format, args...), maxEventMessage))
}

// NewRecorder is client-go's event recorder for a node's agent: Events
// name the component and the node as their source (admission binds the
// source to the credential's node), and the recorder aggregates repeats
// and rate-limits each object's Events. stop flushes nothing and ends the
// recorder's goroutine.
func NewRecorder(core kubernetes.Interface, component, node string) (r record.EventRecorder, stop func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: node}), b.Shutdown
}

// NodePolicy is a node's policy as its PlexusNode reports it.
func NodePolicy(object string, st revision.State) plexusapi.NodePolicy {
	np := plexusapi.NodePolicy{
		Source: st.Source, Object: object, Revision: st.Revision, Error: st.Error,
		ObservedGeneration: st.ObservedGeneration, TestsPassed: int32(min(st.TestsPassed, 1<<30)),
	}
	switch st.Source {
	case revision.SourceDefaults:
		np.Source = "files" // the config's defaultPaths
	case revision.SourceObject:
		np.Generation = st.Generation
	}
	if !st.Since.IsZero() {
		// The API keeps seconds; so does the comparison with it.
		np.Since = metav1.NewTime(st.Since.UTC().Truncate(time.Second))
	}
	return np
}

// maxEventMessage bounds an Event's message (the API allows 1 KiB); the
// recorder does not cut it.
const maxEventMessage = 1000
