// Package podresources asks kubelet's pod-resources API (v1, through the
// generated client in k8s.io/kubelet/pkg/apis/podresources/v1) which
// devices a pod's containers were allocated: the pipeline's DeviceLister.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

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
	conn, err := grpc.NewClient("unix://"+c.Socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
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
			err = fmt.Errorf("kubelet's Get: %v; then %w", getErr, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet's pod-resources API at %s: %w", c.Socket, err)
	}
	return devicesOf(pr), nil
}

// refused tells an answer from kubelet (worth asking List) from a
// connection that failed or timed out (List would fail the same way).
func refused(err error) bool {
	s, ok := status.FromError(err)
	if !ok || err == nil {
		return false
	}
	switch s.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}

func (c *Client) get(ctx context.Context, api podresourcesv1.PodResourcesListerClient, namespace, name string) (*podresourcesv1.PodResources, error) {
	c.count("Get")
	resp, err := api.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: name, PodNamespace: namespace})
	if err != nil {
		return nil, err
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
		return nil, err
	}
	for _, pr := range resp.GetPodResources() {
		if pr.GetNamespace() == namespace && pr.GetName() == name {
			return pr, nil
		}
	}
	return nil, fmt.Errorf("kubelet's List reports no pod %s/%s", namespace, name)
}

// devicesOf gathers every container's devices by resource name.
func devicesOf(pr *podresourcesv1.PodResources) pipeline.PodDevices {
	out := pipeline.PodDevices{}
	for _, c := range pr.GetContainers() {
		for _, d := range c.GetDevices() {
			out[d.GetResourceName()] = append(out[d.GetResourceName()], d.GetDeviceIds()...)
		}
	}
	return out
}

func (c *Client) count(method string) {
	if c.OnCall != nil {
		c.OnCall(method)
	}
}
