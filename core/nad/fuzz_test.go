package nad

import (
	"testing"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/netconf"
)

// FuzzFromSpecConfig: any spec.config either fails or resolves to a config
// with a safe network name and plugin types (s3.4.2 injection included).
func FuzzFromSpecConfig(f *testing.F) {
	for _, s := range []string{
		`{"cniVersion":"0.3.0","type":"awesome-plugin"}`,
		`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"tuning"}]}`,
		`{"type":"../x"}`, `[]`, `{"plugins":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cfg string) {
		out, err := FromSpecConfig("nad-name", []byte(cfg))
		if err != nil {
			return
		}
		c, err := netconf.Parse(out)
		if err != nil {
			t.Fatalf("resolved config does not parse: %v", err)
		}
		if names.Network(c.Name()) != nil {
			t.Fatalf("unsafe network name %q", c.Name())
		}
		for _, ty := range append(c.PluginTypes(), c.IPAMTypes()...) {
			if names.PluginType(ty) != nil {
				t.Fatalf("unsafe plugin type %q", ty)
			}
		}
	})
}
