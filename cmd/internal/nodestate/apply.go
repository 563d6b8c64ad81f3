package nodestate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

// apply writes st to the node's PlexusNode by server-side apply of its
// status: one request once the object exists. The status subresource
// does not create an object, so the first write applies the bare object
// (its name only) and then the status.
func (r *Reporter) apply(ctx context.Context, st plexusapi.PlexusNodeStatus) error {
	obj, err := statusObject(r.o.Node, st)
	if err != nil {
		return err
	}
	err = r.applyStatus(ctx, obj)
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := r.create(ctx); err != nil {
		return err
	}
	return r.applyStatus(ctx, obj)
}

func (r *Reporter) applyStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	_, err := r.o.Client.Resource(plexusapi.PlexusNodes).ApplyStatus(ctx, r.o.Node, obj, r.applyOptions())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("applying the status of PlexusNode %s: %w", r.o.Node, err)
	}
	return err
}

func (r *Reporter) create(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(plexusapi.Group + "/" + plexusapi.Version)
	u.SetKind(plexusapi.KindPlexusNode)
	u.SetName(r.o.Node)
	_, err := r.o.Client.Resource(plexusapi.PlexusNodes).Apply(ctx, r.o.Node, u, r.applyOptions())
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("creating PlexusNode %s: %w (%w)", r.o.Node, ErrNoKind, err)
	}
	if err != nil {
		return fmt.Errorf("creating PlexusNode %s: %w", r.o.Node, err)
	}
	return nil
}

// ErrNoKind: the API server does not serve PlexusNodes (their CRD,
// deploy/base/plexus-crds.yaml, is not installed).
var ErrNoKind = errors.New("the cluster has no PlexusNode kind")

// applyOptions: the agent is the only writer of its node's status, so it
// takes over fields another manager (an admin's kubectl) set.
func (r *Reporter) applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: r.o.FieldManager, Force: true}
}

// statusObject is the apply configuration: the object's identity and the
// status, without null values (a zero time), which apply would read as
// "remove this field".
func statusObject(node string, st plexusapi.PlexusNodeStatus) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("PlexusNode %s status: %w", node, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("PlexusNode %s status: %w", node, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": dropNulls(m)}}
	u.SetAPIVersion(plexusapi.Group + "/" + plexusapi.Version)
	u.SetKind(plexusapi.KindPlexusNode)
	u.SetName(node)
	return u, nil
}

func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			t[k] = dropNulls(e)
		}
	case []any:
		for i, e := range t {
			t[i] = dropNulls(e)
		}
	}
	return v
}
