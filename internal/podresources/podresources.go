// Package podresources asks kubelet's pod-resources gRPC API (v1) which
// devices a pod's containers were allocated: the pipeline's DeviceLister.
// It is the only place plexus speaks gRPC, so core stays free of it.
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
// pod's containers (init containers included: kubelet reports them too).
// It uses Get, GA and locked on since Kubernetes 1.36 (KubeletPodResourcesGet),
// and falls back to List for a kubelet that does not serve Get.
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
		return nil, fmt.Errorf("kubelet's pod-resources socket %s: %w", c.Socket, err)
	}
	defer conn.Close()
	api := podresourcesv1.NewPodResourcesListerClient(conn)
	pr, err := c.get(ctx, api, namespace, name)
	if status.Code(err) == codes.Unimplemented {
		pr, err = c.list(ctx, api, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet's pod-resources API at %s: %w", c.Socket, err)
	}
	return devices(pr), nil
}

func (c *Client) get(ctx context.Context, api podresourcesv1.PodResourcesListerClient, namespace, name string) (*podresourcesv1.PodResources, error) {
	c.count("Get")
	resp, err := api.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: namespace, PodName: name})
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

func (c *Client) count(method string) {
	if c.OnCall != nil {
		c.OnCall(method)
	}
}

// devices gathers every container's device IDs per resource.
func devices(pr *podresourcesv1.PodResources) pipeline.PodDevices {
	out := pipeline.PodDevices{}
	for _, ctr := range pr.GetContainers() {
		for _, d := range ctr.GetDevices() {
			out[d.GetResourceName()] = append(out[d.GetResourceName()], d.GetDeviceIds()...)
		}
	}
	return out
}
