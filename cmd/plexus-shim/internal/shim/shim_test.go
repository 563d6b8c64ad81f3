package shim

import (
	"testing"

	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
)

func TestPodOfNamesThePodOrTheContainer(t *testing.T) {
	tests := []struct{ args, want string }{
		{"IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web", "pod demo/web"},
		{"IgnoreUnknown=1", "container c1"},
		{"", "container c1"},
		{"K8S_POD_NAME", "container c1"},
	}
	for _, tt := range tests {
		c := &wire.Call{Env: map[string]string{"CNI_ARGS": tt.args, "CNI_CONTAINERID": "c1"}}
		if got := podOf(c); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.args, got, tt.want)
		}
	}
}
