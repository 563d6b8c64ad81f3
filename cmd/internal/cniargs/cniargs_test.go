package cniargs

import (
	"reflect"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		args  string
		ref   string
		uid   string
		pairs [][2]string
		err   string
	}{
		{args: "", ref: ""},
		{
			args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u1;X=y",
			ref:  "demo/web", uid: "u1",
			pairs: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "web"}, {"K8S_POD_INFRA_CONTAINER_ID", "c1"}, {"K8S_POD_UID", "u1"}, {"X", "y"}},
		},
		{args: "K8S_POD_NAME=web;K8S_POD_NAMESPACE=demo", ref: "demo/web", pairs: [][2]string{{"K8S_POD_NAME", "web"}, {"K8S_POD_NAMESPACE", "demo"}}},
		{args: "K8S_POD_NAMESPACE=demo", ref: "", pairs: [][2]string{{"K8S_POD_NAMESPACE", "demo"}}},
		{args: "K8S_POD_NAME=web;X=y", err: "unknown args"},
		{args: "K8S_POD_NAME", err: "invalid pair"},
		{args: "K8S_POD_NAME=a=b", err: "invalid pair"},
		{args: "IgnoreUnknown=maybe", err: "IgnoreUnknown=maybe"},
	}
	for _, tt := range tests {
		p, pairs, err := Load(tt.args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "CNI_ARGS") {
				t.Errorf("%q: err %v, want one naming CNI_ARGS with %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || p.Ref() != tt.ref || string(p.K8S_POD_UID) != tt.uid || !reflect.DeepEqual(pairs, tt.pairs) {
			t.Errorf("%q: %+v %v %v, want ref %q uid %q pairs %v", tt.args, p, pairs, err, tt.ref, tt.uid, tt.pairs)
		}
	}
}
