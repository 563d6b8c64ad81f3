package config

import (
	"strings"
	"testing"
	"time"
)

const base = `"type":"plexus","cniVersion":"1.0.0","name":"plexus"`

func TestCompatKeysAccepted(t *testing.T) {
	c, err := Parse([]byte(`{` + base + `,"clusterNetwork":"/etc/cni/net.d/10-calico.conflist",
	  "defaultNetworks":["sidecar","monitoring/tap"],"systemNamespaces":["kube-system","admin"],
	  "readinessindicatorfile":"/etc/cni/net.d/10-calico.conflist","readinessTimeout":"45s",
	  "auxiliaryCNIChainName":"extras","logFile":"/var/log/plexus.log",
	  "logOptions":{"maxSize":100,"maxBackups":5,"maxAge":7,"compress":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.DefaultNetworks) != 2 || !c.IsSystemNamespace("admin") || c.IsSystemNamespace("default") ||
		c.ReadinessWait() != 45*time.Second || c.AuxiliaryCNIChainName != "extras" ||
		*c.LogOptions != (LogOptions{MaxSize: 100, MaxBackups: 5, MaxAge: 7, Compress: true}) {
		t.Errorf("parsed %+v", c)
	}
}

func TestCompatDefaults(t *testing.T) {
	c, err := Parse([]byte(`{` + base + `,"clusterNetwork":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsSystemNamespace("kube-system") || len(c.SystemNamespaces) != 1 || c.ReadinessWait() != DefaultReadinessTimeout {
		t.Errorf("defaults %+v", c)
	}
	// An explicit empty list exempts no namespace.
	c, err = Parse([]byte(`{` + base + `,"clusterNetwork":"x","systemNamespaces":[]}`))
	if err != nil || c.IsSystemNamespace("kube-system") {
		t.Errorf("systemNamespaces [] gave %v, %v", c.SystemNamespaces, err)
	}
}

func TestDelegatesAsTheDefaultNetwork(t *testing.T) {
	c, err := Parse([]byte(`{` + base + `,"delegates":[{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"type":"calico"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterNetwork != "" || len(c.Delegates) != 1 {
		t.Errorf("parsed %+v", c)
	}
}

func TestCompatKeyErrorsNameTheKey(t *testing.T) {
	tests := []struct{ keys, want string }{
		{`"clusterNetwork":"x","defaultNetworks":["ok","Bad_Name"]}`, `"defaultNetworks[1]": NAD reference name "Bad_Name" is not a DNS-1123 label`},
		{`"clusterNetwork":"x","defaultNetworks":["../etc"]}`, `"defaultNetworks[0]": NAD reference namespace ".." is not a DNS-1123 label`},
		{`"clusterNetwork":"x","defaultNetworks":["a/b/c"]}`, `"defaultNetworks[0]": NAD reference name "b/c"`},
		{`"clusterNetwork":"x","defaultNetworks":"sidecar"}`, `"defaultNetworks": want []string, got string`},
		{`"clusterNetwork":"x","systemNamespaces":["kube-system",""]}`, `"systemNamespaces[1]": namespace is empty`},
		{`"clusterNetwork":"x","readinessindicatorfile":"etc/ready"}`, `"readinessindicatorfile": "etc/ready" must be an absolute path`},
		{`"clusterNetwork":"x","readinessindicatorfile":"/etc/../ready"}`, `"readinessindicatorfile": "/etc/../ready" is not a clean path`},
		{`"clusterNetwork":"x","readinessTimeout":"5s"}`, `"readinessTimeout" is set but "readinessindicatorfile" is not`},
		{`"clusterNetwork":"x","readinessindicatorfile":"/r","readinessTimeout":"5"}`, `"readinessTimeout": "5" is not a duration`},
		{`"delegates":[]}`, `"delegates" is empty`},
		{`"clusterNetwork":"x","delegates":[{"name":"a","type":"ptp"}]}`, `"clusterNetwork" and "delegates" both name the default network`},
		{`"delegates":[{"name":"a","type":"ptp"},{"name":"b","type":"macvlan"}]}`, `"delegates" has 2 elements`},
		{`"delegates":[{"type":"ptp"}]}`, `"delegates[0]": the CNI config has no "name"`},
		{`"delegates":[{"name":"a","type":"../bin/sh"}]}`, `"delegates[0]": CNI config: "type"`},
		{`"delegates":[{"name":"p","type":"plexus"}]}`, `"delegates[0]" is plexus itself`},
		{`"delegates":[5]}`, `"delegates[0]": CNI config is not a JSON object`},
		{`"clusterNetwork":"x","auxiliaryCNIChainName":"../x"}`, `"auxiliaryCNIChainName": network name "../x" is invalid`},
		{`"clusterNetwork":"x","logOptions":{"maxSize":10}}`, `"logOptions" is set but "logFile" is not`},
		{`"clusterNetwork":"x","logFile":"/l","logOptions":{"maxSize":-1}}`, `"logOptions.maxSize": -1 is outside`},
		{`"clusterNetwork":"x","logFile":"/l","logOptions":{"maxBackups":100000}}`, `"logOptions.maxBackups": 100000 is outside`},
		{`"clusterNetwork":"x","logFile":"/l","logOptions":{"maxsize":10}}`, `"logOptions": unknown key "maxsize"`},
		{`"clusterNetwork":"x","logFile":"/l","logOptions":{"compress":"yes"}}`, `"logOptions.compress": want bool`},
		{`"clusterNetwork":"x","logFile":"/l","logOptions":[]}`, `"logOptions": want an object`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Parse([]byte(`{` + base + `,` + tt.keys))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "plexus config: ") {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
