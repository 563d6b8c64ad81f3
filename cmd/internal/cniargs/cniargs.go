// Package cniargs reads CNI_ARGS with the CNI library's types.LoadArgs
// into the keys kubelet's runtime sets; the shim links it alone.
package cniargs

import (
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Pod is CNI_ARGS as a runtime sets them for a pod, keyed by field name.
type Pod struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString
	K8S_POD_NAME               types.UnmarshallableString
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString
	K8S_POD_UID                types.UnmarshallableString
}

// Load reads CNI_ARGS as the CNI library does, and returns the pairs
// too, in the runtime's order, for the delegates (RuntimeConf.Args).
func Load(args string) (*Pod, [][2]string, error) {
	p := &Pod{}
	if err := types.LoadArgs(args, p); err != nil {
		return nil, nil, fmt.Errorf("CNI_ARGS %q: %w", args, err)
	}
	if args == "" {
		return p, nil, nil
	}
	var pairs [][2]string
	for pair := range strings.SplitSeq(args, ";") {
		k, v, _ := strings.Cut(pair, "=") // LoadArgs checked: exactly one '='
		pairs = append(pairs, [2]string{k, v})
	}
	return p, pairs, nil
}

// Ref is "namespace/name", or "" when CNI_ARGS name no pod.
func (p *Pod) Ref() string {
	if p.K8S_POD_NAME == "" {
		return ""
	}
	return string(p.K8S_POD_NAMESPACE) + "/" + string(p.K8S_POD_NAME)
}
