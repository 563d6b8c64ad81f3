package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

const testConflist = `{"cniVersion":"1.0.0","name":"blue","plugins":[` +
	`{"type":"macvlan","master":"eth0","ipam":{"type":"static"}},{"type":"tuning"}]}`

// newRequest is pod team-a/web-0 selecting team-a/blue through the
// annotation value, as the pipeline would build it for element 0.
func newRequest(t testing.TB, annotation string) *pipeline.AuthorizeRequest {
	t.Helper()
	pod := &source.Pod{
		Namespace: "team-a", Name: "web-0", UID: "0b9e1c1e-0000-4000-8000-000000000001",
		Labels:             map[string]string{"app": "web", "tier": "gold"},
		Annotations:        map[string]string{selection.Annotation: annotation},
		ServiceAccountName: "default", NodeName: "node-1",
	}
	res, err := selection.Parse(annotation, pod.Namespace)
	if err != nil {
		t.Fatalf("test annotation %q: %v", annotation, err)
	}
	el := res.Elements[0]
	return &pipeline.AuthorizeRequest{
		Pod:             pod,
		NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "team-a"},
		Selections:      res.Elements,
		Attachment: &pipeline.Attachment{
			Index: el.Index, Origin: pipeline.OriginSelection, Selection: el, Name: el.Ref(), IfName: "net1",
			NAD:    testNAD(el.Namespace, el.Name, nil),
			Config: json.RawMessage(testConflist),
		},
	}
}

func testNAD(ns, name string, annotations map[string]string) *source.NAD {
	return &nad.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: nad.Group + "/" + nad.Version, Kind: nad.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"net": name}, Annotations: annotations},
		Spec:       nad.Spec{Config: testConflist},
	}
}

// writeFiles writes name → content under a new temporary directory.
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// decisionPolicy is a module whose decision is the given Rego expression.
func decisionPolicy(expr string) string {
	return fmt.Sprintf("package plexus.authz\n\ndecision := %s\n", expr)
}

// newEngine compiles cfg; without a deadline it uses the longest allowed,
// so that only the tests about deadlines depend on one.
func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	if cfg.Deadline == 0 {
		cfg.Deadline = Duration(MaxDeadline)
	}
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return e
}

// libraryEngine has the whole library with every rule enabled.
func libraryEngine(t testing.TB) *Engine {
	t.Helper()
	return newEngine(t, Config{Paths: []string{libraryDir, filepath.Join("testdata", "config-all.yaml")}})
}

func codes(d pipeline.Decision) string {
	cs := make([]string, 0, len(d.Reasons))
	for _, r := range d.Reasons {
		cs = append(cs, r.Code)
	}
	sort.Strings(cs)
	return strings.Join(cs, ",")
}
