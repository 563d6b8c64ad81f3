package extensions

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/netconf"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/status"
)

// FuzzGuestOutput: whatever bytes a guest writes, the host either refuses
// them with an error or applies a change that keeps type, name and
// cniVersion, adds only new CNI_ARGS, and puts only owned reverse-domain
// keys in the status entry.
func FuzzGuestOutput(f *testing.F) {
	for _, s := range []string{
		`{"config":{"cniVersion":"1.0.0","name":"n","type":"bridge","mtu":1400}}`,
		`{"config":{"cniVersion":"1.0.0","name":"n","type":"sh"}}`,
		`{"addCNIArgs":{"VLAN":"5"},"addConfigArgs":{"k":1}}`,
		`{"addCNIArgs":{"K8S_POD_NAME":"evil"}}`,
		`{"status":{"com.example.vlan":5,"gateway":"x"}}`,
		`{"reject":{"message":"no"}}`, `[]`, `null`, `{"config":"x"}`,
	} {
		f.Add([]byte(s))
	}
	decl := &Declaration{Manifest: Manifest{Name: "fuzz", Prefixes: []string{"com.example."}}}
	const conf = `{"cniVersion":"1.0.0","name":"n","type":"bridge"}`
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decodeOutput(b)
		if err != nil {
			return
		}
		a := &pipeline.Attachment{Config: json.RawMessage(conf), CNIArgs: [][2]string{{"K8S_POD_NAME", "web"}}}
		if plan, err := planPrepare(a, out); err == nil {
			plan.apply(a)
			c, err := netconf.Parse(a.Config)
			if err != nil {
				t.Fatalf("accepted a config that does not parse: %s", a.Config)
			}
			if c.Name() != "n" || c.CNIVersion() != "1.0.0" || strings.Join(c.PluginTypes(), ",") != "bridge" {
				t.Fatalf("accepted a change to name, cniVersion or type: %s", a.Config)
			}
			if a.CNIArgs[0] != [2]string{"K8S_POD_NAME", "web"} {
				t.Fatalf("CNI_ARGS changed: %v", a.CNIArgs)
			}
		}
		if err := checkStatusKeys(decl, out.Status); err == nil {
			e := &status.Entry{Name: "x"}
			if err := applyStatus(e, out.Status); err != nil {
				t.Fatalf("checked keys failed to apply: %v", err)
			}
			for k := range e.Extra {
				// The module owns the domain com.example and everything under it.
				if !strings.HasPrefix(k+".", "com.example.") {
					t.Fatalf("unowned status key %q applied", k)
				}
			}
		}
	})
}
