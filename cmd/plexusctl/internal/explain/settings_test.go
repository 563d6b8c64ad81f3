package explain

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/codes"
)

// TestExplainPlansWithTheNodesSettings: the plan takes the settings the
// pod's node reports in its PlexusNode (or --config's), so a pod the
// defaults would attach is refused where the node refuses it, and the
// reverse; without either it says it assumed the defaults.
func TestExplainPlansWithTheNodesSettings(t *testing.T) {
	multusOnly := networks("blue@data0")
	podDefault := map[string]string{"v1.multus-cni.io/default-network": "calico"}
	tests := []struct {
		name     string
		ann      map[string]string
		settings *plexusapi.NodeSettings // nil: no PlexusNode
		config   string                  // a --config file's content
		pod      string                  // the pod's namespace; team-a when empty
		code     uint                    // the ADD's error; 0: it attaches ifaces
		ifaces   []string
		from     string
		warning  string
	}{
		{name: "defaults without a PlexusNode", ann: multusOnly, ifaces: []string{"eth0", "data0"}, from: "defaults",
			warning: "no PlexusNode node-1: the plan uses plexus's defaults: compat multus, strictSelection false, systemNamespace kube-system"},
		{name: "compat off ignores the Multus form", ann: multusOnly, settings: &plexusapi.NodeSettings{Compat: "off"}, ifaces: []string{"eth0"}, from: "PlexusNode node-1"},
		{name: "strictSelection refuses it", ann: multusOnly, settings: &plexusapi.NodeSettings{Compat: "off", StrictSelection: true}, code: codes.InvalidSelection},
		{name: "defaultNetworks come first", ann: networks("blue"), settings: &plexusapi.NodeSettings{Compat: "multus", SystemNamespace: "infra", DefaultNetworks: []string{"dn"}},
			ifaces: []string{"eth0", "net1", "net2"}},
		{name: "systemNamespaces are exempt", ann: networks("blue"), pod: "infra", settings: &plexusapi.NodeSettings{Compat: "multus", SystemNamespace: "infra", DefaultNetworks: []string{"dn"}, SystemNamespaces: []string{"infra"}},
			ifaces: []string{"eth0", "net1"}},
		{name: "systemNamespace holds the pod's default network", ann: podDefault, settings: &plexusapi.NodeSettings{Compat: "multus", SystemNamespace: "infra"}, ifaces: []string{"eth0"}},
		{name: "not in the default systemNamespace", ann: podDefault, code: codes.NetworkNotFound},
		{name: "compat off ignores the pod's default network", ann: podDefault, settings: &plexusapi.NodeSettings{Compat: "off"}, ifaces: []string{"eth0"}},
		{name: "a config file's settings", ann: multusOnly, config: `{"cniVersion":"1.0.0","name":"plexus","type":"plexus","clusterNetwork":"/etc/cni/net.d","strictSelection":true}`,
			code: codes.InvalidSelection, from: "config "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.pod
			if ns == "" {
				ns = "team-a"
			}
			fc := fakeCluster{
				pods: []*corev1.Pod{testPod(ns, "web", tt.ann)},
				nads: []*unstructured.Unstructured{
					testNAD(ns, "blue", bridgeConf, nil), testNAD("infra", "dn", bridgeConf, nil), testNAD("infra", "calico", bridgeConf, nil),
				},
			}
			if tt.settings != nil {
				fc.plexus = []runtime.Object{plexusNodeObj("node-1", plexusapi.PlexusNodeStatus{Settings: tt.settings})}
			}
			opts := Options{Namespace: ns, Name: "web", Cluster: fc.cluster(t)}
			if tt.config != "" {
				opts.ConfigFile = writeFile(t, "plexus.conf", tt.config)
			}
			r, err := Explain(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Add.Code != tt.code || r.Add.Fails != (tt.code != 0) || !reflect.DeepEqual(r.Add.Interfaces, tt.ifaces) {
				t.Errorf("ADD %+v, want code %d, interfaces %v; problems %q", r.Add, tt.code, tt.ifaces, r.Problems)
			}
			if !strings.HasPrefix(r.Settings.From, tt.from) {
				t.Errorf("settings from %q, want %q", r.Settings.From, tt.from)
			}
			if w := strings.Join(r.Warnings, "\n"); !strings.Contains(w, tt.warning) {
				t.Errorf("warnings lack %q:\n%s", tt.warning, w)
			}
		})
	}
}
