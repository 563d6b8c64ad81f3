// Package podresources asks kubelet's pod-resources API (v1,
// k8s.io/kubelet/pkg/apis/podresources/v1) which devices a pod's
// containers were allocated: the pipeline's DeviceLister.
//
// It speaks gRPC itself: one unary call over HTTP/2 on the unix socket,
// the messages encoded with protowire. grpc-go and the generated client
// would add 80 packages to the thin plugin, text/template among them
// (which keeps the linker from dropping unused methods): 8.7 MB more
// binary for two RPCs. The tests check this client against grpc-go's
// server and a real kubelet.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/plexus-cni/plexus/core/pipeline"
)

// DefaultTimeout bounds one call: kubelet answers from memory.
const DefaultTimeout = 10 * time.Second

// maxMessage bounds List's answer, which covers every pod on the node.
const maxMessage = 16 << 20

// Client is one node's kubelet pod-resources API.
type Client struct {
	// Socket is kubelet's pod-resources unix socket.
	Socket string
	// Timeout bounds each call; zero means DefaultTimeout.
	Timeout time.Duration
	// OnCall, when set, is told of every RPC made ("Get" or "List"), for
	// plexusd's metrics and the tests' counts.
	OnCall func(method string)
}

var _ pipeline.DeviceLister = (*Client)(nil)

// The service's methods (api.proto: package v1, service PodResourcesLister).
const (
	methodGet  = "/v1.PodResourcesLister/Get"
	methodList = "/v1.PodResourcesLister/List"
)

// PodDevices returns the device IDs of each resource allocated to the
// pod's containers. It uses Get, GA and locked on since Kubernetes 1.36
// (KubeletPodResourcesGet), and falls back to List when Get fails.
func (c *Client) PodDevices(ctx context.Context, namespace, name string) (pipeline.PodDevices, error) {
	if _, err := os.Stat(c.Socket); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kubelet's pod-resources socket %s does not exist (is kubelet running, and is podResourcesSocket right?)", c.Socket)
		}
		return nil, fmt.Errorf("kubelet's pod-resources socket: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn := newConn(c.Socket)
	defer conn.close()
	pr, err := c.get(ctx, conn, namespace, name)
	var se *statusError
	if errors.As(err, &se) {
		// Kubelets before 1.36 may not serve Get: before 1.27 it does not
		// exist (Unimplemented), until 1.34 it is off by default ("Get
		// method disabled", code Unknown). List answers on every kubelet.
		pr, err = c.list(ctx, conn, namespace, name)
		if err != nil {
			err = fmt.Errorf("kubelet's Get: %v; then %w", se, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet's pod-resources API at %s: %w", c.Socket, err)
	}
	return pr.devices, nil
}

func (c *Client) get(ctx context.Context, conn *conn, namespace, name string) (*podResources, error) {
	c.count("Get")
	resp, err := conn.call(ctx, methodGet, encodeGetRequest(name, namespace))
	if err != nil {
		return nil, err
	}
	pr, err := decodeGetResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("decoding Get's answer: %w", err)
	}
	if pr == nil {
		return nil, fmt.Errorf("kubelet's Get returned no resources for pod %s/%s", namespace, name)
	}
	return pr, nil
}

func (c *Client) list(ctx context.Context, conn *conn, namespace, name string) (*podResources, error) {
	c.count("List")
	resp, err := conn.call(ctx, methodList, nil)
	if err != nil {
		return nil, err
	}
	pr, err := decodeListResponse(resp, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("decoding List's answer: %w", err)
	}
	if pr == nil {
		return nil, fmt.Errorf("kubelet's List reports no pod %s/%s", namespace, name)
	}
	return pr, nil
}

func (c *Client) count(method string) {
	if c.OnCall != nil {
		c.OnCall(method)
	}
}
