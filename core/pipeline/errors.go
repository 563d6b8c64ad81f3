package pipeline

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// newError builds the CNI error the runtime sees. The message names the pod
// and the network when known, then the reason.
func newError(code uint, pod, network string, err error) *types.Error {
	msg := ""
	if pod != "" {
		msg = "pod " + pod + ": "
	}
	if network != "" {
		msg += "network " + network + ": "
	}
	return &types.Error{Code: code, Msg: msg + err.Error()}
}

// asCNIError keeps an error that is already a CNI error and wraps others.
func asCNIError(code uint, pod, network string, err error) *types.Error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	return newError(code, pod, network, err)
}
