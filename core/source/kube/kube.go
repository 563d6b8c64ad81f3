// Package kube is the Kubernetes source for thin mode: one GET for the pod,
// one per distinct NAD, a PATCH of the network-status annotation and one
// event, each with a timeout and bounded retries. It speaks JSON over a
// plain REST client: the generated clientset would cost every CNI process
// the registration of every API type at start.
package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/core/status"
)

// Options tune the API calls.
type Options struct {
	CallTimeout time.Duration // one request
	Budget      time.Duration // one call with its retries
	Component   string        // names plexus in events
	// NodeName is the source host of events; "" takes the pod's node.
	NodeName string
	Log      *slog.Logger
	// Prewarm connects to the API server (TCP and TLS) as the source is
	// built, so a thin ADD's first request does not wait for the handshake.
	Prewarm bool
}

func (o *Options) defaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.Budget <= 0 {
		o.Budget = 30 * time.Second
	}
	o.Component = cmp.Or(o.Component, "plexus")
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
}

// Source reads from and writes to a kube-apiserver.
type Source struct {
	client *rest.RESTClient
	opts   Options
	warm   *warmDialer // nil unless Prewarm applied
}

// Config loads a kubeconfig file, or the in-cluster config when path is
// empty; read on every call so rotated credentials take effect.
func Config(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// New builds a source from a rest config.
func New(cfg *rest.Config, opts Options) (*Source, error) {
	opts.defaults()
	c := rest.CopyConfig(cfg)
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	c.APIPath = "/api"
	c.GroupVersion = &schema.GroupVersion{Version: "v1"}
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.UserAgent = cmp.Or(c.UserAgent, opts.Component)
	// A CNI call makes a handful of requests; client-side throttling would
	// only add latency.
	c.QPS, c.Burst = 100, 200
	var warm *warmDialer
	if opts.Prewarm {
		c, warm = prewarm(c, opts.CallTimeout)
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		if warm != nil {
			warm.close()
		}
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return &Source{client: client, opts: opts, warm: warm}, nil
}

// Close ends a connection made ahead that no request used.
func (s *Source) Close() {
	if s.warm != nil {
		s.warm.close()
	}
}

// Pod implements source.Source.
func (s *Source) Pod(ctx context.Context, namespace, name string) (*source.Pod, error) {
	var o source.PodObject
	if err := s.get(ctx, "pod", "Pod", namespace, name, &o, "/api/v1/namespaces", namespace, "pods", name); err != nil {
		return nil, err
	}
	return o.Pod(), nil
}

// NAD implements source.Source with a GET of the one object.
func (s *Source) NAD(ctx context.Context, namespace, name string) (*source.NAD, error) {
	const kind = "NetworkAttachmentDefinition"
	var n source.NAD
	if err := s.get(ctx, kind, kind, namespace, name, &n, "/apis/k8s.cni.cncf.io/v1/namespaces", namespace, "network-attachment-definitions", name); err != nil {
		return nil, err
	}
	return &n, nil
}

// NamespaceLabels implements source.NamespaceLabeler.
func (s *Source) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	var o struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := s.get(ctx, "namespace", "", namespace, "", &o, "/api/v1/namespaces", namespace); err != nil {
		return nil, err
	}
	if o.Metadata.Labels == nil {
		o.Metadata.Labels = map[string]string{}
	}
	return o.Metadata.Labels, nil
}

// get GETs the object at path into v. what names it in errors; a missing
// object is source.NotFound(kind, ...) unless kind is "".
func (s *Source) get(ctx context.Context, what, kind, namespace, name string, v any, path ...string) error {
	ref := namespace
	if name != "" {
		ref += "/" + name
	}
	var raw []byte
	err := s.retry(ctx, "get "+what+" "+ref, func(ctx context.Context) (err error) {
		raw, err = s.verb(http.MethodGet).AbsPath(path...).DoRaw(ctx)
		return err
	})
	if kind != "" && apierrors.IsNotFound(err) {
		return source.NotFound(kind, namespace, name)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding %s %s: %w", what, ref, err)
	}
	return nil
}

// PublishStatus sets the one annotation with a merge patch of the pod's
// status subresource, which keeps metadata changes but never the spec, so
// plexus needs no write to pods themselves. Nothing else is rewritten, so
// nothing conflicts, and the whole list is replaced, so a retried ADD
// never duplicates entries. The patch carries the pod's UID, which the
// API server refuses to change: a pod re-created under the same name is
// left alone.
func (s *Source) PublishStatus(ctx context.Context, pod *source.Pod, doc []byte) error {
	meta := map[string]any{"annotations": map[string]string{status.Annotation: string(doc)}}
	if pod.UID != "" {
		meta["uid"] = pod.UID
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	err = s.retry(ctx, "patch pod "+pod.Ref(), func(ctx context.Context) error {
		return s.client.Patch(types.MergePatchType).MaxRetries(0).AbsPath("/api/v1/namespaces", pod.Namespace, "pods", pod.Name, "status").Body(patch).Do(ctx).Error()
	})
	if pod.UID != "" && apierrors.IsInvalid(err) {
		return fmt.Errorf("pod %s no longer has UID %s (re-created under the same name?): %w", pod.Ref(), pod.UID, err)
	}
	return err
}

// Event implements source.EventRecorder; events are best effort.
func (s *Source) Event(ctx context.Context, pod *source.Pod, typ source.EventType, reason, message string) {
	body, err := json.Marshal(s.event(pod, typ, reason, message))
	if err != nil {
		return
	}
	err = s.retry(ctx, "create event for pod "+pod.Ref(), func(ctx context.Context) error {
		return s.verb(http.MethodPost).AbsPath("/api/v1/namespaces", pod.Namespace, "events").Body(body).Do(ctx).Error()
	})
	if err != nil {
		s.opts.Log.Warn("recording event", "pod", pod.Ref(), "reason", reason, "err", err)
	}
}

// maxEventMessage is what the API accepts in an event message.
const maxEventMessage = 1024

// event is a core/v1 Event about the pod, marshalled here: the client's
// scheme knows no API types (see the package comment).
func (s *Source) event(pod *source.Pod, typ source.EventType, reason, message string) *corev1.Event {
	message = names.Truncate(message, maxEventMessage)
	now := metav1.Now()
	host := cmp.Or(s.opts.NodeName, pod.NodeName)
	return &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID),
		},
		Type: string(typ), Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: s.opts.Component, Host: host},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: s.opts.Component, ReportingInstance: host,
	}
}

// verb starts a request without client-go's own retries (on Retry-After):
// retry is the one retry loop, so attempts and the budget mean what they say.
func (s *Source) verb(v string) *rest.Request {
	return s.client.Verb(v).MaxRetries(0)
}

// retry runs one API call with per-attempt timeouts and backoff, in budget.
func (s *Source) retry(ctx context.Context, what string, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Budget)
	defer cancel()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		err := call(actx)
		acancel()
		if err == nil || !transient(err) {
			return final(what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: gave up after %d attempts within %s: %w", what, attempt, s.opts.Budget, err)
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// final names the call in an error that is not worth retrying.
func final(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		// client-go's text for 401 does not say which side is wrong.
		return fmt.Errorf("%s: unauthorized, the credentials were refused (expired or rotated token?): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// transient: conflicts, throttling, server errors, timeouts, connections.
func transient(err error) bool {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		code := int(se.Status().Code)
		return code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500 ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
	}
	return true // transport-level: refused, reset, deadline of one attempt
}

// PodCondition is a pod status condition plexus owns (kubelet keeps it).
type PodCondition struct {
	Type    string
	Status  string // "True" or "False"
	Reason  string
	Message string
}

// SetPodCondition sets one condition with a strategic merge patch (by type).
func (s *Source) SetPodCondition(ctx context.Context, pod *source.Pod, c PodCondition) error {
	c.Message = names.Truncate(c.Message, maxEventMessage)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
		"lastTransitionTime": metav1.Now(),
	}}}})
	if err != nil {
		return err
	}
	return s.retry(ctx, "patch status of pod "+pod.Ref(), func(ctx context.Context) error {
		return s.client.Patch(types.StrategicMergePatchType).MaxRetries(0).AbsPath("/api/v1/namespaces", pod.Namespace, "pods", pod.Name, "status").Body(patch).Do(ctx).Error()
	})
}
