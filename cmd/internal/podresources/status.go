package podresources

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rpcError is a call's gRPC status other than OK, shown as "Method: code
// Name: message" rather than grpc-go's "rpc error: code = ... desc = ...".
type rpcError struct {
	method string
	status *status.Status
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("%s: code %s: %s", e.method, e.status.Code(), e.status.Message())
}

// GRPCStatus lets status.FromError and status.Code read the status.
func (e *rpcError) GRPCStatus() *status.Status { return e.status }

// callError wraps a generated client's error with the method called.
func callError(method string, err error) error {
	s, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", method, err)
	}
	return &rpcError{method: method, status: s}
}

// refused tells an answer from kubelet (worth asking List) from a failed connection.
func refused(err error) bool {
	var e *rpcError
	if !errors.As(err, &e) {
		return false
	}
	switch e.status.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable:
		return false
	}
	return true
}
