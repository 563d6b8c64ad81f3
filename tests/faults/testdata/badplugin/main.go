// Command badplugin is a fault-injection CNI plugin for plexus's tests. It
// runs chained after a real plugin (bridge) in a conflist, so the network
// is really attached when it misbehaves and plexus must undo it (s7.2).
//
// Its config picks the fault for ADD ("mode") and for DEL ("delMode"):
//
//	ok       pass the previous result through
//	crash    panic (exit status 2, a stack trace on stderr, no result)
//	hang     never return
//	garbage  print something that is not a CNI result and exit 0
//	block    wait until releaseFile exists, then behave as ok
//
// Every invocation appends "<COMMAND> <pid>" to markerFile first, so a
// test knows the plugin is running and which process it is.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

type conf struct {
	types.NetConf
	Mode        string `json:"mode"`
	DelMode     string `json:"delMode"`
	MarkerFile  string `json:"markerFile"`
	ReleaseFile string `json:"releaseFile"`
}

// pollInterval is how often block mode looks for the release file.
const pollInterval = 20 * time.Millisecond

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return run(a, "ADD") },
		Del:    func(a *skel.CmdArgs) error { return run(a, "DEL") },
		Check:  func(a *skel.CmdArgs) error { return nil },
		GC:     func(a *skel.CmdArgs) error { return nil },
		Status: func(a *skel.CmdArgs) error { return nil },
	}, version.All, "badplugin: fault injection for plexus tests")
}

func run(a *skel.CmdArgs, cmd string) error {
	var c conf
	if err := json.Unmarshal(a.StdinData, &c); err != nil {
		return fmt.Errorf("badplugin: config: %w", err)
	}
	if err := mark(c.MarkerFile, cmd); err != nil {
		return err
	}
	mode := c.Mode
	if cmd == "DEL" {
		mode = c.DelMode
	}
	if err := misbehave(mode, c.ReleaseFile); err != nil {
		return err
	}
	if cmd == "DEL" {
		return nil
	}
	return passThrough(&c)
}

func mark(path, cmd string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("badplugin: marker: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s %d\n", cmd, os.Getpid())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// misbehave returns only for the modes that go on to succeed.
func misbehave(mode, release string) error {
	switch mode {
	case "", "ok":
		return nil
	case "crash":
		panic("badplugin: crash requested")
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "garbage":
		fmt.Print("\x00this is not a CNI result {{{")
		os.Exit(0)
	case "block":
		for {
			if _, err := os.Stat(release); err == nil {
				return nil
			}
			time.Sleep(pollInterval)
		}
	}
	return fmt.Errorf("badplugin: unknown mode %q", mode)
}

// passThrough returns the previous plugin's result, as a chained plugin
// that changes nothing does.
func passThrough(c *conf) error {
	if c.RawPrevResult == nil {
		return fmt.Errorf("badplugin must run after another plugin: no prevResult")
	}
	if err := version.ParsePrevResult(&c.NetConf); err != nil {
		return fmt.Errorf("badplugin: prevResult: %w", err)
	}
	return types.PrintResult(c.PrevResult, c.CNIVersion)
}
