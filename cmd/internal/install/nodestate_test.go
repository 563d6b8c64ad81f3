package install

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
)

// TestObservedFollowsPasses: each pass records what the node's PlexusNode
// reports, and OnChange fires only when that changed.
func TestObservedFollowsPasses(t *testing.T) {
	n := newNode(t)
	o := n.options()
	changes := 0
	o.OnChange = func() { changes++ }
	in, err := New(o)
	must(t, err)
	ctx := context.Background()
	steps := []struct {
		name    string
		before  func()
		want    nodestate.Install
		changes int
	}{
		{"no default network: no config", func() {}, nodestate.Install{ConfigPath: n.ours(), BinDirs: []string{n.bin}}, 1},
		{"again: no change", func() {}, nodestate.Install{ConfigPath: n.ours(), BinDirs: []string{n.bin}}, 1},
		{"default network appears: config written", func() { n.writeDefault("10-default.conflist") }, nodestate.Install{
			ConfigInstalled: true, ConfigPath: n.ours(), DefaultNetwork: "k8s-pod-network", DefaultNetworkFile: n.conf + "/10-default.conflist",
			Plugins: []string{"plexus", "bridge", "portmap"}, BinDirs: []string{n.bin},
		}, 2},
		{"default network gone: config removed", func() { must(t, os.Remove(n.conf+"/10-default.conflist")) }, nodestate.Install{ConfigPath: n.ours(), BinDirs: []string{n.bin}}, 3},
	}
	for _, s := range steps {
		s.before()
		must(t, in.Reconcile(ctx))
		if got := in.Observed(); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: observed %+v, want %+v", s.name, got, s.want)
		}
		if changes != s.changes {
			t.Errorf("%s: %d changes, want %d", s.name, changes, s.changes)
		}
	}
}

func TestConfTypes(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      []string
	}{
		{"conflist with ipam", `{"plugins":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"portmap"}]}`, []string{"bridge", "host-local", "portmap"}},
		{"single conf", `{"type":"macvlan","ipam":{"type":"dhcp"}}`, []string{"macvlan", "dhcp"}},
		{"ipam not an object", `{"type":"macvlan","ipam":"dhcp"}`, nil},
	} {
		c, err := parseConf([]byte(tc.raw))
		must(t, err)
		if got := c.types(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
