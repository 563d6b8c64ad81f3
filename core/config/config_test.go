package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/core/config/daemonconf"
)

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"plexus","type":"plexus","clusterNetwork":"/etc/cni/net.d/10-bridge.conf"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SystemNamespace != "kube-system" || c.CacheDir != DefaultCacheDir || c.ConfDir != DefaultConfDir {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestParseAcceptsCNIStandardKeys(t *testing.T) {
	in := `{"cniVersion":"0.3.1","name":"p","type":"plexus","clusterNetwork":"x",
	  "capabilities":{"portMappings":true},"runtimeConfig":{"portMappings":[{"hostPort":80}]},
	  "args":{"cni":{}},"prevResult":{},"dns":{},"ipam":{}}`
	c, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Capabilities["portMappings"] || c.RuntimeConfig["portMappings"] == nil {
		t.Errorf("capabilities lost: %+v", c)
	}
}

// A GC's valid attachments are read with the rest of the config, so the
// plugin reads its stdin once.
func TestParseReadsGCValidAttachments(t *testing.T) {
	c, err := Parse([]byte(`{"cniVersion":"1.1.0","name":"p","type":"plexus","clusterNetwork":"x",
	  "cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ValidAttachments) != 1 || c.ValidAttachments[0].ContainerID != "c1" || c.ValidAttachments[0].IfName != "eth0" {
		t.Errorf("valid attachments = %+v", c.ValidAttachments)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, "not a JSON object"},
		{`{"type":"plexus","clusterNetwork":"x","clusterNetworks":"y"}`, `unknown key "clusterNetworks"`},
		{`{"type":"plexus"}`, `"clusterNetwork" is required`},
		{`{"type":"plexus","clusterNetwork":"x","cniVersion":"banana"}`, "cniVersion"},
		{`{"type":"plexus","clusterNetwork":"x","kubeconfig":"a","manifests":"b"}`, "exclusive"},
		{`{"type":"plexus","clusterNetwork":"x","logLevel":"loud"}`, "logLevel"},
		{`{"type":"plexus","clusterNetwork":5}`, "plexus config"},
		{`{"type":"plexus","clusterNetwork":"x","apiTimeout":"10"}`, `"apiTimeout": "10" is not a duration`},
		{`{"type":"plexus","clusterNetwork":"x","apiTimeout":"-1s"}`, `"apiTimeout": "-1s" must be positive`},
		{`{"type":"plexus","clusterNetwork":"x","apiBudget":"soon"}`, `"apiBudget": "soon" is not a duration`},
		{`{"type":"plexus","clusterNetwork":"x","apiBudget":"0s"}`, `"apiBudget": "0s" must be positive`},
		{`{"type":"plexus","clusterNetwork":"x","apiBudget":30}`, `plexus config: "apiBudget": 30 is not a duration string`},
		{`{"type":"plexus","clusterNetwork":"x","daemonSocket":5}`, `plexus config: "daemonSocket": want string, got number`},
		{`{"type":"plexus","clusterNetwork":"x","capabilities":[]}`, `plexus config: "capabilities": want map[string]bool, got array`},
		{`{"type":"plexus","clusterNetwork":"x","compat":"calico"}`, `plexus config: "compat" "calico" is not one of "multus", "off"`},
		{`{"type":"plexus","clusterNetwork":"x","compat":true}`, `plexus config: "compat"`},
		{`{"type":"plexus","clusterNetwork":"x","compat":"off","defaultNetworks":["a"]}`, `"defaultNetworks" comes from Multus and needs "compat": "multus"`},
		{`{"type":"plexus","clusterNetwork":"x","strictSelection":true,"readinessindicatorfile":"/run/ready"}`, `"readinessindicatorfile" comes from Multus`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestCompatSwitch: Multus compatibility is on by default; "off" or
// strictSelection alone gives the spec's behaviour; an explicit "multus"
// wins over strictSelection.
func TestCompatSwitch(t *testing.T) {
	tests := []struct {
		keys string
		want bool
	}{
		{``, true},
		{`,"compat":"multus"`, true},
		{`,"compat":"off"`, false},
		{`,"strictSelection":true`, false},
		{`,"strictSelection":true,"compat":"multus"`, true},
		{`,"strictSelection":false,"compat":"off"`, false},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(`{"type":"plexus","clusterNetwork":"x"` + tt.keys + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.MultusCompat(); got != tt.want {
			t.Errorf("config with %s: MultusCompat() = %v, want %v", tt.keys, got, tt.want)
		}
	}
}

// Every duration key is read by one type, with one message naming the
// key.
func TestDurationKeys(t *testing.T) {
	values := []struct {
		json string
		want time.Duration
		err  string // after the key
	}{
		{json: `"2s"`, want: 2 * time.Second},
		{json: `"1m30.5s"`, want: 90500 * time.Millisecond},
		{json: `null`},
		{json: `"soon"`, err: `"soon" is not a duration such as "10s" or "1m30s"`},
		{json: `"10"`, err: `"10" is not a duration such as "10s"`},
		{json: `""`, err: `"" is not a duration`},
		{json: `"-1s"`, err: `"-1s" must be positive`},
		{json: `"0s"`, err: `"0s" must be positive`},
		{json: `"0"`, err: `"0" must be positive`},
		{json: `20`, err: `20 is not a duration string such as "10s"`},
		{json: `true`, err: `true is not a duration string`},
		{json: `{"s":1}`, err: `{"s":1} is not a duration string`},
	}
	keys := map[string]func(*Config) Duration{
		"apiTimeout":      func(c *Config) Duration { return c.APITimeout },
		"apiBudget":       func(c *Config) Duration { return c.APIBudget },
		"delegateTimeout": func(c *Config) Duration { return c.DelegateTimeout },
		"daemonWait":      func(c *Config) Duration { return c.DaemonWait },
	}
	for key, get := range keys {
		for _, v := range values {
			t.Run(key+"="+v.json, func(t *testing.T) {
				c, err := Parse([]byte(`{"clusterNetwork":"x","` + key + `":` + v.json + `}`))
				if v.err != "" {
					want := `plexus config: "` + key + `": ` + v.err
					if err == nil || !strings.HasPrefix(err.Error(), want) {
						t.Fatalf("got %v, want %s", err, want)
					}
					return
				}
				if err != nil || time.Duration(get(c)) != v.want {
					t.Fatalf("got %v, %v; want %v", get(c), err, v.want)
				}
			})
		}
	}
}

// Durations inside the config's objects (the policy's deadline, an
// extension's timeout) are named by their path from the object decoded.
func TestUnmarshalNamesNestedDurations(t *testing.T) {
	var v struct {
		Modules []struct {
			Timeout Duration `json:"timeout"`
		} `json:"modules"`
	}
	err := Unmarshal([]byte(`{"modules":[{"timeout":"1s"},{"timeout":"-5ms"}]}`), &v)
	if err == nil || err.Error() != `"modules.timeout": "-5ms" must be positive (leave the key out for its default)` {
		t.Fatalf("got %v", err)
	}
	var d Duration
	if err := Unmarshal([]byte(`"x"`), &d); err == nil || err.Error() != `"x" is not a duration such as "10s" or "1m30s"` {
		t.Fatalf("a duration alone: %v", err)
	}
}

func TestDurationRoundTrips(t *testing.T) {
	for _, d := range []Duration{Duration(50 * time.Millisecond), Duration(90 * time.Second), Duration(time.Nanosecond)} {
		out, err := json.Marshal(d)
		var back Duration
		if err != nil || json.Unmarshal(out, &back) != nil || back != d {
			t.Errorf("%v came back as %v from %s (%v)", time.Duration(d), time.Duration(back), out, err)
		}
	}
	if out, _ := json.Marshal(struct {
		D Duration `json:"d,omitempty"`
	}{}); string(out) != `{}` {
		t.Errorf("an unset duration is written: %s", out)
	}
}

// The shim reads daemonSocket and daemonWait with daemonconf.Parse; it must
// accept and refuse the values Parse accepts and refuses, and read the
// same socket and wait.
func TestDaemonKeysAgreeWithParse(t *testing.T) {
	tests := []struct {
		keys   string
		socket string
		wait   time.Duration
		err    string
	}{
		{keys: `"daemonSocket":"/run/plexus/plexusd.sock"`, socket: "/run/plexus/plexusd.sock", wait: DefaultDaemonWait},
		{keys: `"daemonSocket":"/s","daemonWait":"3s"`, socket: "/s", wait: 3 * time.Second},
		{keys: `"daemonWait":"1m"`, wait: time.Minute},
		{keys: `"name":"plexus"`, wait: DefaultDaemonWait},
		{keys: `"daemonSocket":"/a","daemonSocket":"/b\u00e9"`, socket: "/bé", wait: DefaultDaemonWait},
		{keys: `"daemonSocket":"/a","daemonSocket":null`, socket: "/a", wait: DefaultDaemonWait},
		{keys: `"daemonSocket":"","daemonWait":null`, wait: DefaultDaemonWait},
		{keys: `"daemonSocket":"run/x.sock"`, err: `plexus config: "daemonSocket" "run/x.sock" must be an absolute path`},
		{keys: `"daemonSocket":5`, err: `plexus config: "daemonSocket": want string, got number`},
		{keys: `"daemonSocket":"/s","daemonWait":"soon"`, err: `plexus config: "daemonWait": "soon" is not a duration`},
		{keys: `"daemonWait":"-2s"`, err: `plexus config: "daemonWait": "-2s" must be positive`},
		{keys: `"daemonWait":"0s"`, err: `plexus config: "daemonWait": "0s" must be positive`},
		{keys: `"daemonWait":10`, err: `plexus config: "daemonWait": 10 is not a duration string`},
	}
	for _, tt := range tests {
		t.Run(tt.keys, func(t *testing.T) {
			conf := []byte(`{"clusterNetwork":"/c",` + tt.keys + `}`)
			c, err := Parse(conf)
			d, derr := daemonconf.Parse(conf)
			if tt.err != "" {
				if err == nil || derr == nil || !strings.HasPrefix(err.Error(), tt.err) || !strings.HasPrefix(derr.Error(), tt.err) {
					t.Fatalf("Parse: %v; daemonconf.Parse: %v; want both to start with %q", err, derr, tt.err)
				}
				return
			}
			if err != nil || derr != nil {
				t.Fatalf("Parse: %v; daemonconf.Parse: %v", err, derr)
			}
			if c.DaemonSocket != tt.socket || d.DaemonSocket != tt.socket || c.Daemon().Wait() != tt.wait || d.Wait() != tt.wait {
				t.Fatalf("Parse read %q %v, daemonconf.Parse %q %v; want %q %v", c.DaemonSocket, c.Daemon().Wait(), d.DaemonSocket, d.Wait(), tt.socket, tt.wait)
			}
		})
	}
	for _, bad := range []string{`[]`, `{"daemonSocket":`, `"x"`, `{} x`} {
		if _, err := daemonconf.Parse([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "plexus config is not a JSON object: ") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
