package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/plexus-cni/plexus/policies"
)

// The baseline as built into plexusctl, put to each pod as plexus would
// on ADD; the NADs the pods name need not exist.
func TestBaselineFindings(t *testing.T) {
	res, err := Convert(map[string]json.RawMessage{"type": raw(`"multus"`), "name": raw(`"m"`), "clusterNetwork": raw(`"/x"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policies.NewBaseline(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const networks, defaultNet = "k8s.v1.cni.cncf.io/networks", "v1.multus-cni.io/default-network"
	hostNet := pod("a", "host-net", map[string]string{networks: "b/net"})
	hostNet.Spec.HostNetwork = true
	tests := []struct {
		pod     corev1.Pod
		want    []string // each finding's start, in order; none: allowed
		mention string   // in the first finding
	}{
		{pod: pod("a", "plain", nil)},
		{pod: pod("a", "own-and-default", map[string]string{networks: "net-a,default/net-d"})},
		{pod: pod("a", "other-namespace", map[string]string{networks: "net-a,b/net-b"}), want: []string{"namespace-isolation: pod a/other-namespace may not use network b/net-b"}},
		{pod: pod("a", "ssh", map[string]string{networks: `[{"name":"net-a","portMappings":[{"hostPort":22,"containerPort":22}]}]`}), want: []string{"host-port: "}, mention: "host port 22"},
		{pod: pod("a", "web", map[string]string{networks: `[{"name":"net-a","portMappings":[{"hostPort":8080,"containerPort":80}]}]`})},
		{pod: pod("a", "own-default", map[string]string{defaultNet: "a/calico"}), want: []string{"pod-default-network: pod a/own-default may not choose its default network (a/calico)"}},
		{pod: pod("a", "system-default", map[string]string{defaultNet: "calico"}), want: []string{"namespace-isolation: ", "pod-default-network: "}, mention: "kube-system/calico"},
		{pod: pod("a", "repeated", map[string]string{networks: "b/net,b/net"}), want: []string{"namespace-isolation: "}},
		{pod: pod("a", "invalid", map[string]string{networks: "Net_A"})},
		{pod: hostNet},
	}
	for _, tt := range tests {
		t.Run(tt.pod.Name, func(t *testing.T) {
			got, err := res.BaselineFindings(context.Background(), engine, []corev1.Pod{tt.pod})
			if err != nil {
				t.Fatal(err)
			}
			if !findingsMatch(got, tt.pod.Namespace+"/"+tt.pod.Name, tt.want) || (tt.mention != "" && !strings.Contains(got[0].Reason, tt.mention)) {
				t.Errorf("findings %+v, want %q mentioning %q", got, tt.want, tt.mention)
			}
		})
	}
}

// findingsMatch: one finding of pod per want, starting with it.
func findingsMatch(got []PodFinding, pod string, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i, f := range got {
		if f.Pod != pod || !strings.HasPrefix(f.Reason, want[i]) {
			return false
		}
	}
	return true
}

func TestBaselineReport(t *testing.T) {
	got := BaselineReport([]PodFinding{{"a/x", "host-port: m1"}, {"a/x", "namespace-isolation: m2"}, {"b/y", "host-port: m3"}}, 5)
	want := "baseline policy: 5 pods checked, 2 would be refused\n" +
		"pod a/x: host-port: m1\npod a/x: namespace-isolation: m2\npod b/y: host-port: m3\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestBaselineNeedsKubeconfig(t *testing.T) {
	var stdout bytes.Buffer
	err := Run(context.Background(), Args{From: "testdata/thin-clusternetwork/input.json", Baseline: true}, nil, &stdout)
	if err == nil || !strings.Contains(err.Error(), "give --kubeconfig") {
		t.Errorf("error %v, want one asking for --kubeconfig", err)
	}
}
