package plexusd

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
)

func confList(plugins ...types.NetConf) *libcni.NetworkConfigList {
	l := &libcni.NetworkConfigList{}
	for i := range plugins {
		l.Plugins = append(l.Plugins, &libcni.PluginConfig{Network: &plugins[i]})
	}
	return l
}

// TestDelegateTypesRecordsEachTypeOnce: the node's report learns each
// delegate type once, notified only when one is new, never more than
// nodestate.MaxPlugins, and never a type that is not a file name.
func TestDelegateTypesRecordsEachTypeOnce(t *testing.T) {
	notified := 0
	s := &delegateTypes{notify: func() { notified++ }}
	bridge := types.NetConf{Type: "bridge", IPAM: types.IPAM{Type: "host-local"}}
	s.add(confList(bridge, types.NetConf{Type: "portmap"}))
	s.add(confList(bridge))
	s.add(confList(types.NetConf{Type: "../../bin/sh"}))
	if got, want := s.list(), []string{"bridge", "host-local", "portmap"}; !reflect.DeepEqual(got, want) || notified != 1 {
		t.Errorf("types %v after %d notifications, want %v after 1", got, notified, want)
	}
	for i := range 2 * nodestate.MaxPlugins {
		s.add(confList(types.NetConf{Type: fmt.Sprintf("p%d", i)}))
	}
	if n := len(s.list()); n != nodestate.MaxPlugins {
		t.Errorf("%d types kept, want at most %d", n, nodestate.MaxPlugins)
	}
	var none *delegateTypes
	none.add(confList(bridge)) // plexusd without a reporter: no-op
}

// A plexusd without extensions reports none.
func TestNodeExtensionsWithoutAHost(t *testing.T) {
	if (&Daemon{}).nodeExtensions() != nil {
		t.Error("a plexusd without extensions reports some")
	}
}
