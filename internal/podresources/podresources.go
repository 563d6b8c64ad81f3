// Package podresources asks kubelet's pod-resources API (v1) which devices
// a pod's containers were allocated: the pipeline's DeviceLister.
//
// It speaks the API's two unary calls itself (grpc.go, proto.go) rather
// than through grpc-go and the generated client in
// k8s.io/kubelet/pkg/apis/podresources/v1: those add 9.5 MB to the plexus
// binary and 1.3 ms to the start of every thin-mode CNI call (package
// initialization and page faults, docs/performance.md), while only the
// ADD of a pod selecting a device network asks kubelet anything. The tests
// check it against grpc-go serving the generated API, and tests/node
// against a real kubelet.
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

// PodDevices returns the device IDs of each resource allocated to the
// pod's containers. It uses Get, GA and locked on since Kubernetes 1.36
// (KubeletPodResourcesGet), and falls back to List when kubelet refuses Get.
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
	conn := dial(c.Socket)
	defer conn.close()
	pr, err := c.get(ctx, conn, namespace, name)
	if refused(err) {
		// Kubelets before 1.36 may not serve Get: before 1.27 it does not
		// exist (Unimplemented), until 1.34 it is off by default ("Get
		// method disabled", code Unknown). List answers on every kubelet.
		getErr := err
		pr, err = c.list(ctx, conn, namespace, name)
		if err != nil {
			err = fmt.Errorf("kubelet's Get: %v; then %w", getErr, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet's pod-resources API at %s: %w", c.Socket, err)
	}
	return pr.devices, nil
}

func (c *Client) get(ctx context.Context, conn *conn, namespace, name string) (*podResources, error) {
	c.count("Get")
	resp, err := conn.call(ctx, "Get", getRequest(namespace, name))
	if err != nil {
		return nil, err
	}
	pods, err := decodePods(resp)
	if err != nil {
		return nil, fmt.Errorf("kubelet's Get answer: %w", err)
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("kubelet's Get returned no resources for pod %s/%s", namespace, name)
	}
	return &pods[0], nil
}

func (c *Client) list(ctx context.Context, conn *conn, namespace, name string) (*podResources, error) {
	c.count("List")
	resp, err := conn.call(ctx, "List", nil)
	if err != nil {
		return nil, err
	}
	pods, err := decodePods(resp)
	if err != nil {
		return nil, fmt.Errorf("kubelet's List answer: %w", err)
	}
	for i := range pods {
		if pods[i].namespace == namespace && pods[i].name == name {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("kubelet's List reports no pod %s/%s", namespace, name)
}

func (c *Client) count(method string) {
	if c.OnCall != nil {
		c.OnCall(method)
	}
}
