// Command hostfile is a test delegate that, like flannel's CNI plugin with
// its subnet.env, needs a file its node agent wrote on the host: chained
// after a real plugin, its ADD reads the file named by "path" in its config
// and fails unless it holds "wantLine", then passes the previous result
// through; DEL needs no file (flannel's works from its cache), so a failed
// ADD is undone. A test sees only whether the file was reachable where the
// delegate ran.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

type conf struct {
	types.NetConf
	Path     string `json:"path"`
	WantLine string `json:"wantLine"`
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    add,
		Del:    func(*skel.CmdArgs) error { return nil },
		Check:  func(*skel.CmdArgs) error { return nil },
		GC:     func(*skel.CmdArgs) error { return nil },
		Status: func(*skel.CmdArgs) error { return nil },
	}, version.All, "hostfile: a delegate reading a host file, for plexus's tests")
}

func load(a *skel.CmdArgs) (*conf, error) {
	var c conf
	if err := json.Unmarshal(a.StdinData, &c); err != nil {
		return nil, fmt.Errorf("hostfile: config: %w", err)
	}
	b, err := os.ReadFile(c.Path)
	if err != nil {
		return nil, fmt.Errorf("hostfile: reading the node agent's file: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == c.WantLine {
			return &c, nil
		}
	}
	return nil, fmt.Errorf("hostfile: %s does not hold %q", c.Path, c.WantLine)
}

func add(a *skel.CmdArgs) error {
	c, err := load(a)
	if err != nil {
		return err
	}
	if err := version.ParsePrevResult(&c.NetConf); err != nil {
		return err
	}
	if c.PrevResult == nil {
		return fmt.Errorf("hostfile: runs chained after a plugin that returns a result")
	}
	return types.PrintResult(c.PrevResult, c.CNIVersion)
}
