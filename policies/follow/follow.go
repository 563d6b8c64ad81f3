// Package follow feeds one named AttachmentPolicy to a node's
// revision.Syncer through an informer (one watch, no polls) and reports
// each attempt: the node's own entry of the object's status.nodes, by
// server-side apply on the status subresource, and an Event on the object
// when a revision is activated or refused. plexusd (thick) and the
// installer (thin) run it, each with its own field manager.
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Event reasons on the AttachmentPolicy.
const (
	ReasonActivated = "PolicyActivated"
	ReasonRejected  = "PolicyRejected"
)

// resync is how often the informer replays the object from its cache.
const resync = 10 * time.Minute

// eventNamespace holds Events about cluster-scoped objects, as kubectl
// describe looks for them.
const eventNamespace = metav1.NamespaceDefault

// Options configure Run.
type Options struct {
	Syncer  *revision.Syncer
	Dynamic dynamic.Interface
	// Events creates Events; nil creates none.
	Events kubernetes.Interface
	Node   string
	// FieldManager owns the node's status entry ("plexusd/<node>").
	FieldManager string
	// Component is the Events' reporting component ("plexusd").
	Component string
	// OnResult is called after each attempt, with its error (nil when the
	// revision in force is the object's, or deletion was handled).
	OnResult func(revision.Result, error)
	// CallTimeout bounds each status write and Event; 10s when zero.
	CallTimeout time.Duration
	Log         *slog.Logger
}

// Watch runs the informer.
type Watch struct {
	o       Options
	written *plexusapi.NodePolicyStatus // the entry as last written
}

// New checks the options.
func New(o Options) (*Watch, error) {
	if o.Syncer == nil || o.Dynamic == nil || o.Node == "" || o.FieldManager == "" {
		return nil, errors.New("policy watch: needs a syncer, a dynamic client, the node name and a field manager")
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
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
	// The resync replays the cached object (no API request): a status
	// write that failed is retried then.
	inf := dynamicinformer.NewFilteredDynamicInformer(w.o.Dynamic, plexusapi.AttachmentPolicies, "", resync, cache.Indexers{},
		func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	si := inf.Informer()
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
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var p plexusapi.AttachmentPolicy
	if err := plexusapi.FromUnstructured(u, &p); err != nil {
		w.o.Log.Error("policy object unreadable", "err", err)
		return
	}
	if w.written == nil {
		w.written = entryOf(p.Status.Nodes, w.o.Node)
	}
	res, err := w.o.Syncer.Apply(ctx, &p)
	w.o.OnResult(res, err)
	w.report(ctx, &p, res, err)
}

func (w *Watch) deleted(ctx context.Context) {
	res, err := w.o.Syncer.Delete(ctx)
	w.o.OnResult(res, err)
	w.o.Log.Info("policy object absent", "object", w.o.Syncer.Name(), "source", res.State.Source, "revision", res.State.Revision)
	w.written = nil // the entry went with the object
}

// report writes the node's status entry when it changed, and an Event
// when a revision was activated or newly refused.
func (w *Watch) report(ctx context.Context, p *plexusapi.AttachmentPolicy, res revision.Result, err error) {
	entry := Entry(w.o.Node, res.State)
	if w.written != nil && sameEntry(*w.written, entry) {
		return
	}
	if werr := w.writeStatus(ctx, p.Name, entry); werr != nil {
		w.o.Log.Error("writing the policy's status", "object", p.Name, "err", werr)
		return
	}
	w.written = &entry
	switch {
	case err != nil:
		w.event(ctx, p, corev1.EventTypeWarning, ReasonRejected, fmt.Sprintf("node %s refused generation %d; revision %s stays in force: %v", w.o.Node, p.Generation, res.State.Revision, err))
	case res.Changed:
		w.event(ctx, p, corev1.EventTypeNormal, ReasonActivated, fmt.Sprintf("node %s activated revision %s", w.o.Node, res.State.Revision))
	}
}

// Entry is a node's status entry for a state.
func Entry(node string, st revision.State) plexusapi.NodePolicyStatus {
	e := plexusapi.NodePolicyStatus{
		Node: node, ActiveRevision: st.Revision, ObservedGeneration: st.ObservedGeneration,
		Error: st.Error, TestsPassed: st.TestsPassed,
	}
	if st.Source == revision.SourceObject {
		e.ActiveGeneration = st.Generation
	}
	if !st.Since.IsZero() {
		// The API keeps seconds; so does the comparison with it.
		e.ActiveSince = metav1.NewTime(st.Since.UTC().Truncate(time.Second))
	}
	return e
}

func sameEntry(a, b plexusapi.NodePolicyStatus) bool {
	at, bt := a.ActiveSince, b.ActiveSince
	a.ActiveSince, b.ActiveSince = metav1.Time{}, metav1.Time{}
	return a == b && at.Time.Equal(bt.Time)
}

func entryOf(nodes []plexusapi.NodePolicyStatus, node string) *plexusapi.NodePolicyStatus {
	for _, n := range nodes {
		if n.Node == node {
			return &n
		}
	}
	return nil
}

// writeStatus applies the node's entry alone: the list is keyed by node,
// so each node's field manager owns its entry and no other.
func (w *Watch) writeStatus(ctx context.Context, name string, entry plexusapi.NodePolicyStatus) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&entry)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": plexusapi.Group + "/" + plexusapi.Version,
		"kind":       plexusapi.KindAttachmentPolicy,
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"nodes": []any{m}},
	}}
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	defer cancel()
	_, err = w.o.Dynamic.Resource(plexusapi.AttachmentPolicies).Apply(ctx, name, u,
		metav1.ApplyOptions{FieldManager: w.o.FieldManager, Force: true}, "status")
	return err
}

func (w *Watch) event(ctx context.Context, p *plexusapi.AttachmentPolicy, typ, reason, msg string) {
	if w.o.Events == nil {
		return
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: eventNamespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: plexusapi.Group + "/" + plexusapi.Version, Kind: plexusapi.KindAttachmentPolicy,
			Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
		},
		Reason: reason, Message: names.Truncate(msg, maxEventMessage), Type: typ,
		Source:         corev1.EventSource{Component: w.o.Component, Host: w.o.Node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "plexus.io/" + w.o.Component, ReportingInstance: w.o.Component + "-" + w.o.Node,
	}
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	defer cancel()
	if _, err := w.o.Events.CoreV1().Events(eventNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		w.o.Log.Warn("recording an event on the policy object", "reason", reason, "err", err)
	}
}

// maxEventMessage bounds an Event's message (the API allows 1 KiB).
const maxEventMessage = 1000

// NodePolicy is a node's policy as PlexusNode reports it.
func NodePolicy(object string, st revision.State) plexusapi.NodePolicy {
	np := plexusapi.NodePolicy{Source: st.Source, Object: object, Revision: st.Revision, Error: st.Error}
	if st.Source == revision.SourceDefaults {
		np.Source = "files" // the config's defaultPaths
	}
	if !st.Since.IsZero() {
		np.Since = metav1.NewTime(st.Since)
	}
	return np
}
