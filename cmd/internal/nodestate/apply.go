package nodestate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	applyv1alpha1 "github.com/plexus-cni/plexus/core/api/client/applyconfiguration/api/v1alpha1"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

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
