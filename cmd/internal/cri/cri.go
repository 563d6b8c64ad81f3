// Package cri asks the container runtime, over its CRI socket, where a
// running sandbox's network namespace is (for dynamic attachments: never
// from the pod object), which sandboxes it has (to collect lost ones'
// records), and where it reads CNI configs and plugins.
package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plexus-cni/plexus/cmd/internal/hostroot"
)

// DefaultSocket is containerd's CRI socket.
const DefaultSocket = "/run/containerd/containerd.sock"

// callTimeout bounds one CRI call; the runtime answers in milliseconds.
const callTimeout = 10 * time.Second

// ErrNotReady is wrapped when the sandbox is being stopped or removed.
var ErrNotReady = errors.New("pod sandbox is not ready")

// ErrNotFound is wrapped when the runtime does not know the sandbox.
var ErrNotFound = errors.New("pod sandbox not found")

// Client is a CRI RuntimeService client on a unix socket.
type Client struct {
	conn   *grpc.ClientConn
	rt     runtimeapi.RuntimeServiceClient
	socket string
	root   string
}

// NewInRoot connects lazily to the runtime's socket, reached through root.
func NewInRoot(root, socket string) (*Client, error) {
	dial := func(ctx context.Context, _ string) (net.Conn, error) { return hostroot.DialUnix(ctx, root, socket) }
	conn, err := grpc.NewClient("passthrough:///"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		return nil, fmt.Errorf("CRI socket %s: %w", socket, err)
	}
	return &Client{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn), socket: socket, root: root}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// NetNS returns the network namespace path of pod podUID's ready sandbox id.
func (c *Client) NetNS(ctx context.Context, id, podUID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return "", fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
		}
		return "", fmt.Errorf("CRI PodSandboxStatus %s: %w", id, err)
	}
	return netnsFrom(id, podUID, resp)
}

// SandboxIDs lists every pod sandbox the runtime knows, in every state:
// only a sandbox's absence means the runtime will never send its DEL.
func (c *Client) SandboxIDs(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// No filter: the CRI filters by state only when one is given.
	resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	ids := make([]string, 0, len(resp.GetItems()))
	for _, sb := range resp.GetItems() {
		if id := sb.GetId(); id != "" {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// netnsFrom checks the sandbox and reads its netns from containerd's verbose info.
func netnsFrom(id, podUID string, resp *runtimeapi.PodSandboxStatusResponse) (string, error) {
	st := resp.GetStatus()
	if st == nil {
		return "", fmt.Errorf("sandbox %s: the runtime returned no status", id)
	}
	if uid := st.GetMetadata().GetUid(); podUID == "" || uid != podUID {
		return "", fmt.Errorf("sandbox %s belongs to pod UID %q, not %q", id, uid, podUID)
	}
	if st.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("sandbox %s is %s: %w", id, st.GetState(), ErrNotReady)
	}
	raw, ok := resp.GetInfo()["info"]
	if !ok {
		return "", fmt.Errorf("sandbox %s: the runtime's verbose status has no \"info\" (only containerd's is understood)", id)
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return "", fmt.Errorf("sandbox %s: decoding the runtime's verbose info: %w", id, err)
	}
	for _, ns := range info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return ns.Path, nil
		}
	}
	return "", fmt.Errorf("sandbox %s: the runtime reports no network namespace path (host network?)", id)
}

// CNIDirs is where the runtime reads CNI configs and finds plugins.
type CNIDirs struct {
	// Runtime is the runtime's name and version, as its CRI Version says.
	Runtime string
	ConfDir string
	BinDirs []string
}

// maxConfigBytes bounds the runtime's answer (a few kilobytes).
const maxConfigBytes = 4 << 20

// CNIDirs asks the runtime for its CNI directories: containerd in its
// verbose CRI Status, CRI-O on GET /config on the same socket (as `crio
// status config` does). Other runtimes get an error naming them.
func (c *Client) CNIDirs(ctx context.Context) (CNIDirs, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return CNIDirs{}, fmt.Errorf("CRI Version: %w", err)
	}
	name := v.GetRuntimeName() + " " + v.GetRuntimeVersion()
	var d CNIDirs
	switch v.GetRuntimeName() {
	case "containerd":
		d, err = c.containerdDirs(ctx)
	case "cri-o":
		d, err = crioDirs(ctx, c.root, c.socket)
	default:
		err = fmt.Errorf("only containerd and CRI-O report their CNI directories")
	}
	if err != nil {
		return CNIDirs{}, fmt.Errorf("runtime %s at %s: %w", name, c.socket, err)
	}
	d.Runtime = name
	return d, d.check()
}

func (c *Client) containerdDirs(ctx context.Context) (CNIDirs, error) {
	resp, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return CNIDirs{}, fmt.Errorf("CRI Status: %w", err)
	}
	return containerdDirsFrom(resp.GetInfo())
}

// containerdDirsFrom reads cni.confDir and cni.binDirs (2.x) or binDir (1.x).
func containerdDirsFrom(info map[string]string) (CNIDirs, error) {
	raw, ok := info["config"]
	if !ok {
		return CNIDirs{}, fmt.Errorf("its verbose CRI Status has no \"config\"")
	}
	var conf struct {
		CNI struct {
			ConfDir string   `json:"confDir"`
			BinDir  string   `json:"binDir"`
			BinDirs []string `json:"binDirs"`
		} `json:"cni"`
	}
	if err := json.Unmarshal([]byte(raw), &conf); err != nil {
		return CNIDirs{}, fmt.Errorf("decoding the \"config\" of its verbose CRI Status: %w", err)
	}
	d := CNIDirs{ConfDir: conf.CNI.ConfDir, BinDirs: conf.CNI.BinDirs}
	if len(d.BinDirs) == 0 && conf.CNI.BinDir != "" {
		d.BinDirs = []string{conf.CNI.BinDir}
	}
	return d, nil
}

// crioDirs reads [crio.network] from CRI-O's TOML configuration.
func crioDirs(ctx context.Context, root, socket string) (CNIDirs, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return hostroot.DialUnix(ctx, root, socket)
		},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://cri-o/config", nil)
	if err != nil {
		return CNIDirs{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return CNIDirs{}, fmt.Errorf("GET /config: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigBytes))
	if err != nil {
		return CNIDirs{}, fmt.Errorf("GET /config: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return CNIDirs{}, fmt.Errorf("GET /config: %s", resp.Status)
	}
	return crioDirsFrom(body)
}

func crioDirsFrom(data []byte) (CNIDirs, error) {
	var conf struct {
		Crio struct {
			Network struct {
				NetworkDir string   `toml:"network_dir"`
				PluginDirs []string `toml:"plugin_dirs"`
			} `toml:"network"`
		} `toml:"crio"`
	}
	if _, err := toml.Decode(string(data), &conf); err != nil {
		return CNIDirs{}, fmt.Errorf("decoding its config (GET /config): %w", err)
	}
	return CNIDirs{ConfDir: conf.Crio.Network.NetworkDir, BinDirs: conf.Crio.Network.PluginDirs}, nil
}

// check cleans the directories and refuses a missing or relative one.
func (d *CNIDirs) check() error {
	if d.ConfDir == "" || len(d.BinDirs) == 0 {
		return fmt.Errorf("runtime %s reports no CNI conf dir or bin dir", d.Runtime)
	}
	d.ConfDir = filepath.Clean(d.ConfDir)
	for i, b := range d.BinDirs {
		d.BinDirs[i] = filepath.Clean(b)
	}
	for _, p := range append([]string{d.ConfDir}, d.BinDirs...) {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("runtime %s reports a relative CNI directory %q", d.Runtime, p)
		}
	}
	return nil
}
