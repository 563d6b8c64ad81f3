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
		{`{"type":"plexus","clusterNetwork":"x","apiBudget":30}`, "plexus config"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestParseAPIDurations(t *testing.T) {
	c, err := Parse([]byte(`{"type":"plexus","clusterNetwork":"x","apiTimeout":"2s","apiBudget":"1m30s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.APITimeoutDuration != 2*time.Second || c.APIBudgetDuration != 90*time.Second {
		t.Errorf("apiTimeout/apiBudget = %v/%v, want 2s/1m30s", c.APITimeoutDuration, c.APIBudgetDuration)
	}
	c, err = Parse([]byte(`{"type":"plexus","clusterNetwork":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.APITimeoutDuration != 0 || c.APIBudgetDuration != 0 {
		t.Errorf("unset apiTimeout/apiBudget = %v/%v, want 0 (source defaults)", c.APITimeoutDuration, c.APIBudgetDuration)
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Duration
		wantErr string
	}{
		{in: `"50ms"`, want: Duration(50 * time.Millisecond)},
		{in: `"1.5s"`, want: Duration(1500 * time.Millisecond)},
		{in: `20`, wantErr: `want a duration string such as "50ms", got 20`},
		{in: `"soon"`, wantErr: `duration "soon"`},
	}
	for _, tc := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || d != tc.want {
			t.Errorf("%s: %v, %v", tc.in, time.Duration(d), err)
		}
		out, _ := json.Marshal(d)
		var back Duration
		if json.Unmarshal(out, &back) != nil || back != d {
			t.Errorf("%s does not round-trip: %s", tc.in, out)
		}
	}
}

// The shim reads the socket and wait with its own scanner
// (daemonconf); it must read them as Parse does.
func TestShimReadsDaemonKeysAsParseDoes(t *testing.T) {
	for _, conf := range []string{
		`{"clusterNetwork":"/c","daemonSocket":"/run/plexus/plexusd.sock","policy":{"paths":[]}}`,
		`{"clusterNetwork":"/c","daemonSocket":"/s","daemonWait":"3s"}`,
		`{"clusterNetwork":"/c","name":"plexus"}`,
		`{"clusterNetwork":"/c","daemonSocket":"/a","daemonSocket":"/b\u00e9"}`,
		`{"clusterNetwork":"/c","daemonSocket":"run/x.sock"}`,
		`{"clusterNetwork":"/c","daemonSocket":"/s","daemonWait":"soon"}`,
		`{"clusterNetwork":"/c","daemonWait":"-2s"}`,
	} {
		t.Run(conf, func(t *testing.T) {
			c, err := Parse([]byte(conf))
			d, derr := daemonconf.Parse([]byte(conf))
			if (err == nil) != (derr == nil) {
				t.Fatalf("Parse: %v; shim: %v", err, derr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), derr.Error()) {
					t.Fatalf("messages differ: %q and %q", err, derr)
				}
				return
			}
			if c.DaemonSocket != d.Socket || c.DaemonWaitDuration != d.Wait {
				t.Fatalf("Parse read %q %v; shim %q %v", c.DaemonSocket, c.DaemonWaitDuration, d.Socket, d.Wait)
			}
		})
	}
}
