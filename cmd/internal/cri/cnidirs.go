package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"

	"github.com/BurntSushi/toml"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plexus-cni/plexus/cmd/internal/hostroot"
)

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
