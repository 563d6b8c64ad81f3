// Command cnispy records what a container runtime sends a CNI plugin, then
// runs the plugin in its place. The node tests install it in front of
// plexus to see exactly what containerd sends: the CNI_* environment, the
// config's runtimeConfig keys and every call, in order.
//
// Its config is the wrapped plugin's, plus "cnispyLog" (a file each call is
// appended to as a JSON line) and "cnispyType" (the plugin run afterwards,
// found in CNI_PATH); both keys are removed and "type" set back before the
// plugin reads the config.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/tests/node/internal/chain"
)

// Call is one recorded invocation.
type Call struct {
	Command     string   `json:"command"`
	ContainerID string   `json:"containerID"`
	Netns       string   `json:"netns"`
	IfName      string   `json:"ifName"`
	Args        string   `json:"args"`
	RuntimeKeys []string `json:"runtimeConfigKeys"`
	// PodAnnotations is runtimeConfig's io.kubernetes.cri.pod-annotations.
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	HasPrevResult  bool              `json:"hasPrevResult"`
}

func main() {
	if err := run(); err != nil {
		// The CNI error format, so the runtime shows what went wrong.
		msg, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": "cnispy: " + err.Error()})
		fmt.Println(string(msg))
		os.Exit(1)
	}
}

func run() error {
	// VERSION carries no config: CRI-O's libcni sends it to every plugin
	// of a config it loads, to validate the config's cniVersion.
	if os.Getenv("CNI_COMMAND") == "VERSION" {
		return version.All.Encode(os.Stdout)
	}
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var conf map[string]json.RawMessage
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	var logPath, typ string
	if err := json.Unmarshal(conf["cnispyLog"], &logPath); err != nil || logPath == "" {
		return fmt.Errorf("config has no cnispyLog")
	}
	if err := json.Unmarshal(conf["cnispyType"], &typ); err != nil || typ == "" || strings.ContainsRune(typ, '/') {
		return fmt.Errorf("config has no valid cnispyType")
	}
	if err := record(logPath, conf); err != nil {
		return err
	}
	delete(conf, "cnispyLog")
	delete(conf, "cnispyType")
	conf["type"], _ = json.Marshal(typ)
	out, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	return chain.Exec(typ, out)
}

func record(logPath string, conf map[string]json.RawMessage) error {
	c := Call{
		Command:     os.Getenv("CNI_COMMAND"),
		ContainerID: os.Getenv("CNI_CONTAINERID"),
		Netns:       os.Getenv("CNI_NETNS"),
		IfName:      os.Getenv("CNI_IFNAME"),
		Args:        os.Getenv("CNI_ARGS"),
	}
	_, c.HasPrevResult = conf["prevResult"]
	var rc map[string]json.RawMessage
	_ = json.Unmarshal(conf["runtimeConfig"], &rc)
	for k := range rc {
		c.RuntimeKeys = append(c.RuntimeKeys, k)
	}
	sort.Strings(c.RuntimeKeys)
	_ = json.Unmarshal(rc["io.kubernetes.cri.pod-annotations"], &c.PodAnnotations)
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open cnispyLog: %w", err)
	}
	defer f.Close()
	// One write of a line under O_APPEND: concurrent calls do not interleave.
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write cnispyLog: %w", err)
	}
	return nil
}
