package config

import (
	"strings"
	"testing"
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

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, "not a JSON object"},
		{`{"type":"plexus","clusterNetwork":"x","clusterNetworks":"y"}`, `unknown key "clusterNetworks"`},
		{`{"type":"plexus"}`, `"clusterNetwork" is required`},
		{`{"type":"plexus","clusterNetwork":"x","cniVersion":"banana"}`, "cniVersion"},
		{`{"type":"plexus","clusterNetwork":"x","kubeconfig":"a","manifests":"b"}`, "exclusive"},
		{`{"type":"plexus","clusterNetwork":"x","logLevel":"loud"}`, "logLevel"},
		{`{"type":"plexus","clusterNetwork":5}`, "plexus config"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}
