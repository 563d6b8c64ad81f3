// Command devhost is the node tests' device delegate. It records the
// device plexus handed it, then runs the reference host-device plugin on
// that device, so the link really moves into the pod and back.
//
// The device plugin of the tests backs each device with a host link named
// by the device ID. host-device takes a PCI or auxiliary device in
// runtimeConfig's "deviceID" and a link name in "device"; devhost moves the
// one to the other, as a netdev-based delegate would read it. Its config is
// host-device's plus "devhostLog" (a file each call is appended to as a
// JSON line).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/plexus-cni/plexus/tests/node/internal/chain"
)

// Call is one recorded invocation: the device as plexus passed it in the
// config and in runtimeConfig, and the CNI device-info file with the
// content it had when the delegate ran.
type Call struct {
	Command         string          `json:"command"`
	IfName          string          `json:"ifName"`
	ConfigDeviceID  string          `json:"configDeviceID"`
	RuntimeDeviceID string          `json:"runtimeDeviceID"`
	DeviceInfoFile  string          `json:"deviceInfoFile"`
	DeviceInfo      json.RawMessage `json:"deviceInfo,omitempty"`
}

func main() {
	if err := run(); err != nil {
		msg, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": "devhost: " + err.Error()})
		fmt.Println(string(msg))
		os.Exit(1)
	}
}

func run() error {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	var conf map[string]any
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fmt.Errorf("parse config: %w", err)
	}
	logPath, _ := conf["devhostLog"].(string)
	if logPath == "" {
		return fmt.Errorf("config has no devhostLog")
	}
	c := Call{Command: os.Getenv("CNI_COMMAND"), IfName: os.Getenv("CNI_IFNAME")}
	c.ConfigDeviceID, _ = conf["deviceID"].(string)
	rc, _ := conf["runtimeConfig"].(map[string]any)
	c.RuntimeDeviceID, _ = rc["deviceID"].(string)
	c.DeviceInfoFile, _ = rc["CNIDeviceInfoFile"].(string)
	if c.DeviceInfoFile != "" {
		if data, err := os.ReadFile(c.DeviceInfoFile); err == nil && json.Valid(data) {
			c.DeviceInfo = data
		}
	}
	if err := appendLine(logPath, c); err != nil {
		return err
	}
	device := c.RuntimeDeviceID
	if device == "" {
		device = c.ConfigDeviceID
	}
	if device == "" && c.Command == "ADD" {
		return fmt.Errorf("no deviceID in the config or runtimeConfig")
	}
	delete(conf, "devhostLog")
	delete(conf, "deviceID")
	delete(rc, "deviceID")
	conf["type"] = "host-device"
	if device != "" {
		conf["device"] = device
	}
	out, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	return chain.Exec("host-device", out)
}

func appendLine(path string, c Call) error {
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open devhostLog: %w", err)
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}
