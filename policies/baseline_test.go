package policies

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
)

// baselineRequest is pod team-a/web-0 with the annotation, parsed as
// plexus's default config does ("compat": "multus"), deciding on element 0.
func baselineRequest(t *testing.T, annotation string) *pipeline.AuthorizeRequest {
	t.Helper()
	req := newRequest(t, "blue")
	req.Pod.Annotations[selection.Annotation] = annotation
	res, err := selection.ParseWith(annotation, req.Pod.Namespace, selection.ParseOptions{Compat: true})
	if err != nil {
		t.Fatalf("test annotation %q: %v", annotation, err)
	}
	el := res.Elements[0]
	req.Selections = res.Elements
	req.Attachment.Selection = el
	req.Attachment.Name = el.Ref()
	req.Attachment.NAD = testNAD(el.Namespace, el.Name, nil)
	return req
}

// podDefaultRequest is pod team-a/web-0 choosing ns/name as its default
// network (v1.multus-cni.io/default-network).
func podDefaultRequest(t *testing.T, ns, name string) *pipeline.AuthorizeRequest {
	t.Helper()
	req := newRequest(t, "blue")
	req.Pod.Annotations = map[string]string{selection.DefaultNetworkAnnotation: ns + "/" + name}
	req.Selections = nil
	req.Attachment = &pipeline.Attachment{
		Origin: pipeline.OriginPodDefault, Default: true, Name: ns + "/" + name, IfName: "eth0",
		NAD: testNAD(ns, name, nil), Config: json.RawMessage(testConflist),
	}
	return req
}

// The baseline as shipped (library + baseline.yaml) and as embedded in
// the binaries (NewBaseline) decide alike, and as docs/security.md says.
func TestBaselineDecisions(t *testing.T) {
	engines := map[string]*Engine{
		"files":    newEngine(t, Config{Paths: []string{libraryDir, BaselineFile}}),
		"embedded": mustBaseline(t),
	}
	tests := []struct {
		name      string
		req       func(t *testing.T) *pipeline.AuthorizeRequest
		wantCodes string
		wantInMsg string
	}{
		{name: "own namespace's network, no portMappings", req: annotated("blue")},
		{name: "network of default", req: annotated("default/blue")},
		{name: "network of another namespace", req: annotated("team-b/blue"), wantCodes: "namespace-isolation", wantInMsg: "team-b/blue"},
		{
			name:      "host port 22",
			req:       annotated(`[{"name":"blue","portMappings":[{"hostPort":22,"containerPort":22}]}]`),
			wantCodes: "host-port", wantInMsg: "host port 22",
		},
		{name: "host port 8080", req: annotated(`[{"name":"blue","portMappings":[{"hostPort":8080,"containerPort":80}]}]`)},
		{
			name:      "host port 443 in a later mapping",
			req:       annotated(`[{"name":"blue","portMappings":[{"hostPort":8080,"containerPort":80},{"hostPort":443,"containerPort":443,"protocol":"udp"}]}]`),
			wantCodes: "host-port", wantInMsg: "portMappings[1]",
		},
		{
			name:      "host port 22 on the loopback address",
			req:       annotated(`[{"name":"blue","portMappings":[{"hostPort":22,"containerPort":22,"hostIP":"127.0.0.1"}]}]`),
			wantCodes: "host-port", wantInMsg: "host port 22",
		},
		{
			// plexus's parser and the policy both keep the last of
			// duplicate keys, so the policy judges the port plexus maps.
			name:      "duplicate hostPort key, last one low",
			req:       annotated(`[{"name":"blue","portMappings":[{"hostPort":8080,"containerPort":22,"hostPort":22}]}]`),
			wantCodes: "host-port", wantInMsg: "host port 22",
		},
		{
			name: "pod default network of its own namespace", req: podDefault("team-a", "calico"),
			wantCodes: "pod-default-network", wantInMsg: "may not choose its default network",
		},
		{
			name: "pod default network of another namespace", req: podDefault("kube-system", "calico"),
			wantCodes: "namespace-isolation,pod-default-network",
		},
	}
	for ename, e := range engines {
		for _, tc := range tests {
			t.Run(ename+"/"+tc.name, func(t *testing.T) {
				d, err := e.Authorize(context.Background(), tc.req(t))
				if err != nil {
					t.Fatal(err)
				}
				if got := codes(d); got != tc.wantCodes || d.Allowed != (tc.wantCodes == "") {
					t.Fatalf("decision %+v: codes %q, want %q", d, got, tc.wantCodes)
				}
				if tc.wantInMsg != "" && !strings.Contains(d.Reasons[0].Message, tc.wantInMsg) {
					t.Errorf("message %q does not mention %q", d.Reasons[0].Message, tc.wantInMsg)
				}
			})
		}
	}
}

func annotated(annotation string) func(*testing.T) *pipeline.AuthorizeRequest {
	return func(t *testing.T) *pipeline.AuthorizeRequest { return baselineRequest(t, annotation) }
}

func podDefault(ns, name string) func(*testing.T) *pipeline.AuthorizeRequest {
	return func(t *testing.T) *pipeline.AuthorizeRequest { return podDefaultRequest(t, ns, name) }
}

func mustBaseline(t *testing.T) *Engine {
	t.Helper()
	e, err := NewBaseline(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e
}
