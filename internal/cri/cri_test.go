package cri

import (
	"errors"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNetNSFrom(t *testing.T) {
	info := `{"pid":7,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1"}]}}}`
	resp := func(uid string, state runtimeapi.PodSandboxState, info map[string]string) *runtimeapi.PodSandboxStatusResponse {
		return &runtimeapi.PodSandboxStatusResponse{
			Status: &runtimeapi.PodSandboxStatus{Id: "s1", State: state, Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}},
			Info:   info,
		}
	}
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	tests := []struct {
		name    string
		resp    *runtimeapi.PodSandboxStatusResponse
		want    string
		wantErr string
		is      error
	}{
		{"containerd's info", resp("u1", ready, map[string]string{"info": info}), "/var/run/netns/cni-1", "", nil},
		{"another pod's sandbox", resp("u2", ready, map[string]string{"info": info}), "", `belongs to pod UID "u2", not "u1"`, nil},
		{"not ready", resp("u1", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, map[string]string{"info": info}), "", "SANDBOX_NOTREADY", ErrNotReady},
		{"no verbose info", resp("u1", ready, nil), "", `no "info"`, nil},
		{"host network", resp("u1", ready, map[string]string{"info": `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}}`}), "", "no network namespace path", nil},
		{"garbled info", resp("u1", ready, map[string]string{"info": `{`}), "", "decoding", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := netnsFrom("s1", "u1", tt.resp)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || (tt.is != nil && !errors.Is(err, tt.is)) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
}
