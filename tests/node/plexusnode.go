package node

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

// getPlexusNode reads the node's PlexusNode through the test's dynamic
// client.
func getPlexusNode(ctx context.Context, dyn dynamic.Interface, name string) (*plexusapi.PlexusNode, error) {
	u, err := dyn.Resource(plexusapi.PlexusNodes).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var pn plexusapi.PlexusNode
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pn); err != nil {
		return nil, err
	}
	return &pn, nil
}
