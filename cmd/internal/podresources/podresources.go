// Package podresources asks kubelet's pod-resources API (v1), through its
// generated client over grpc-go, which devices a pod's containers were
// allocated.
package podresources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultTimeout bounds one call: kubelet answers from memory.
const DefaultTimeout = 10 * time.Second

// maxMessage bounds List's answer, which covers every pod on the node.
const maxMessage = 16 << 20

// Client is one node's kubelet pod-resources API.
type Client struct {
	Socket  string              // kubelet's pod-resources unix socket
	Timeout time.Duration       // of each call; zero means DefaultTimeout
	OnCall  func(method string) // when set, told of every RPC ("Get", "List")
}

// PodDevices returns the device IDs of each resource name allocated to the
// pod's containers. It uses Get, GA and locked on since Kubernetes 1.36
// (KubeletPodResourcesGet), and falls back to List when kubelet refuses Get.
func (c *Client) PodDevices(ctx context.Context, namespace, name string) (map[string][]string, error) {
	if err := c.checkSocket(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(max(c.Timeout, 0), DefaultTimeout))
	defer cancel()
	conn, err := c.dial()
	if err != nil {
		return nil, fmt.Errorf("kubelet's pod-resources API at %s: %w", c.Socket, err)
	}
	defer func() { _ = conn.Close() }()
	api := podresourcesv1.NewPodResourcesListerClient(conn)
	pr, err := c.get(ctx, api, namespace, name)
	if refused(err) {
		// Kubelets before 1.36 may not serve Get: before 1.27 it does not
		// exist (Unimplemented), until 1.34 it is off by default ("Get
		// method disabled", code Unknown). List answers on every kubelet.
		getErr := err
		pr, err = c.list(ctx, api, namespace, name)
		if err != nil {
			err = fmt.Errorf("%v; then %w", getErr, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet's pod-resources API at %s: %w", c.Socket, err)
	}
	return devicesOf(pr), nil
}

// checkSocket names a missing socket plainly, not as a connection failure.
func (c *Client) checkSocket() error {
	_, err := os.Stat(c.Socket)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kubelet's pod-resources socket %s does not exist (is kubelet running, and is podResourcesSocket right?)", c.Socket)
	}
	if err != nil {
		return fmt.Errorf("kubelet's pod-resources socket: %w", err)
	}
	return nil
}

// dial makes a lazy client connection to the socket path as it is.
func (c *Client) dial() (*grpc.ClientConn, error) {
	socket := c.Socket
	return grpc.NewClient("passthrough:///localhost",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
}

func (c *Client) get(ctx context.Context, api podresourcesv1.PodResourcesListerClient, namespace, name string) (*podresourcesv1.PodResources, error) {
	c.count("Get")
	resp, err := api.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: name, PodNamespace: namespace})
	if err != nil {
		return nil, callError("Get", err)
	}
	if resp.GetPodResources() == nil {
		return nil, fmt.Errorf("kubelet's Get returned no resources for pod %s/%s", namespace, name)
	}
	return resp.GetPodResources(), nil
}

func (c *Client) list(ctx context.Context, api podresourcesv1.PodResourcesListerClient, namespace, name string) (*podresourcesv1.PodResources, error) {
	c.count("List")
	resp, err := api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, callError("List", err)
	}
	for _, pr := range resp.GetPodResources() {
		if pr.GetNamespace() == namespace && pr.GetName() == name {
			return pr, nil
		}
	}
	return nil, fmt.Errorf("kubelet's List reports no pod %s/%s", namespace, name)
}

// devicesOf gathers every container's device IDs by resource name.
func devicesOf(pr *podresourcesv1.PodResources) map[string][]string {
	devs := map[string][]string{}
	for _, ctr := range pr.GetContainers() {
		for _, d := range ctr.GetDevices() {
			devs[d.GetResourceName()] = append(devs[d.GetResourceName()], d.GetDeviceIds()...)
		}
	}
	return devs
}

func (c *Client) count(method string) {
	if c.OnCall != nil {
		c.OnCall(method)
	}
}

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
