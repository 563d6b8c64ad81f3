package shim

import (
	"encoding/json"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/internal/daemon/wire"
)

func TestErrorDocumentIsACNIError(t *testing.T) {
	e := &Error{Code: codes.DaemonUnreachable, Msg: "plexusd \"down\"\n"}
	var got struct {
		Code uint   `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal(e.Document(), &got); err != nil || got.Code != 115 || got.Msg != e.Msg {
		t.Fatalf("%s: %+v %v", e.Document(), got, err)
	}
}

func TestCNIEnvKeepsOnlyCNIVariables(t *testing.T) {
	env := CNIEnv([]string{"CNI_COMMAND=ADD", "PATH=/bin", "CNI_ARGS=a=b;c=d", "HOME=/root", "CNI_", "CNIX=1"})
	if len(env) != 2 || env["CNI_ARGS"] != "a=b;c=d" || env["CNI_COMMAND"] != "ADD" {
		t.Fatalf("%v", env)
	}
}

func TestPodOfNamesThePodOrTheContainer(t *testing.T) {
	tests := []struct{ args, want string }{
		{"IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web", "pod demo/web"},
		{"IgnoreUnknown=1", "container c1"},
		{"", "container c1"},
	}
	for _, tt := range tests {
		c := &wire.Call{Env: map[string]string{"CNI_ARGS": tt.args, "CNI_CONTAINERID": "c1"}}
		if got := podOf(c); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.args, got, tt.want)
		}
	}
}
