package pipeline

import (
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// CNI error codes plexus returns; 100 and above are the plugin's own.
const (
	CodeInvalidSelection   uint = 100 // strictSelection and an invalid s4.1 annotation
	CodeNetworkNotFound    uint = 101 // a NAD is missing or does not resolve (s3.4.1)
	CodePolicyDenied       uint = 102 // s7.4 denial
	CodeExtension          uint = 103 // the prepare stage rejected or failed
	CodeAttachFailed       uint = 104 // a delegate ADD failed (s7.2)
	CodeNotHonored         uint = 105 // requested ips or mac not in the result (s4.1.2.1.3.2, s4.1.2.1.4.2)
	CodePodLookup          uint = 106 // the pod could not be read or is not the one the runtime means
	CodeStatus             uint = 107 // network-status could not be published
	CodeRecord             uint = 108 // the attachment record could not be written
	CodeDetachFailed       uint = 109 // one or more delegate DELs failed
	CodeCheckFailed        uint = 110 // a delegate CHECK failed
	CodeInterfaceConflict  uint = 111 // a requested interface name is already used (s4.1.2.1.5)
	CodeClusterNetwork     uint = 112 // the cluster-wide default network cannot be loaded (s6)
	CodeGarbageCollection  uint = 113 // GC could not finish
	CodeDefaultNotReady    uint = 114 // STATUS: the default network's delegates are not ready
	CodeDefaultRoute       uint = 116 // "default-route" (Multus compatibility) could not be applied
	CodeDevices            uint = 117 // the pod's devices could not be found or do not suffice (115 is internal/shim's)
	CodeInvalidEnvironment uint = 4   // CNI's own code for bad CNI_* variables
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

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
