package cniplugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/internal/daemon"
)

func TestHandleRefusesMissingEnvironment(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "CNI_COMMAND"},
		{map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c"}, "CNI_NETNS"},
		{map[string]string{"CNI_COMMAND": "DEL", "CNI_NETNS": "/x"}, "CNI_CONTAINERID"},
		{map[string]string{"CNI_COMMAND": "VERSION"}, "CNI_COMMAND"},
	} {
		r := Options{}.Handle(context.Background(), &daemon.Call{Env: tt.env})
		var e types.Error
		if !r.Failed || json.Unmarshal(r.Stdout, &e) != nil || e.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(e.Msg, tt.want) {
			t.Errorf("%v: reply %+v (%s)", tt.env, r, r.Stdout)
		}
	}
}

func TestHandleBadConfigIsACNIError(t *testing.T) {
	r := Options{}.Handle(context.Background(), &daemon.Call{
		Env:   map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c", "CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin"},
		Stdin: []byte(`{"cniVersion":"1.0.0","name":"plexus","type":"plexus","clusterNetwork":"/x","bogus":true}`),
	})
	var e types.Error
	if !r.Failed || json.Unmarshal(r.Stdout, &e) != nil || e.Code != types.ErrInvalidNetworkConfig || !strings.Contains(e.Msg, `"bogus"`) {
		t.Errorf("reply %s", r.Stdout)
	}
}
