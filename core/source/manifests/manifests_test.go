package manifests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/source"
)

const docs = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: demo
  uid: "1234"
  labels: {app: web}
  annotations:
    k8s.v1.cni.cncf.io/networks: net-a
spec:
  serviceAccountName: sa
  nodeName: node1
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: net-a
  namespace: demo
spec:
  config: '{"cniVersion":"1.0.0","type":"bridge"}'
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
`

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadPodsAndNADs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", docs)
	write(t, dir, "b.yml", "kind: NetworkAttachmentDefinition\nmetadata: {name: other}\n")
	write(t, dir, "c.txt", "kind: Pod\nmetadata: {name: BAD}\n")
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod, err := s.Pod(ctx, "demo", "web")
	if err != nil {
		t.Fatal(err)
	}
	if pod.UID != "1234" || pod.Labels["app"] != "web" || pod.NodeName != "node1" || pod.ServiceAccountName != "sa" || pod.Annotations["k8s.v1.cni.cncf.io/networks"] != "net-a" {
		t.Errorf("pod = %+v", pod)
	}
	n, err := s.NAD(ctx, "demo", "net-a")
	if err != nil || !strings.Contains(n.Spec.Config, "bridge") {
		t.Fatalf("nad %v %v", n, err)
	}
	if _, err := s.NAD(ctx, "default", "other"); err != nil {
		t.Errorf("a NAD without namespace belongs to default: %v", err)
	}
	if _, err := s.Pod(ctx, "demo", "nope"); !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), "demo/nope") {
		t.Errorf("missing pod error = %v", err)
	}
}

func TestLoadRejectsBadNames(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", "kind: NetworkAttachmentDefinition\nmetadata: {name: ../../x, namespace: demo}\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "a.yaml document 0") {
		t.Fatalf("err = %v", err)
	}
	write(t, dir, "a.yaml", "kind: Pod\nmetadata: {name: [1}\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "a.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestStatusFileLifecycle(t *testing.T) {
	dir := t.TempDir()
	s := published(t, dir)
	p := filepath.Join(dir, StatusDir, "demo_web.json")
	if b, err := os.ReadFile(p); err != nil || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("status file %q %v", b, err)
	}
	if err := s.RemoveStatus(context.Background(), "demo", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("status file left after RemoveStatus")
	}
	if _, err := s.StatusPath("demo", "../x"); err == nil {
		t.Fatal("a path-like pod name became a path")
	}
}

// TestStatusOnlyReadsNoManifest: DEL's source removes the pod's status
// file past a manifest that does not parse, and knows no pod.
func TestStatusOnlyReadsNoManifest(t *testing.T) {
	dir := t.TempDir()
	published(t, dir)
	write(t, dir, "broken.yaml", "kind: [")
	if _, err := NewDir(dir).Current(); err == nil {
		t.Fatal("the broken manifest parsed")
	}
	del := StatusOnly(dir)
	if _, err := del.Pod(context.Background(), "demo", "web"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("StatusOnly found the pod: %v", err)
	}
	if err := del.RemoveStatus(context.Background(), "demo", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, StatusDir, "demo_web.json")); !os.IsNotExist(err) {
		t.Fatal("status file left after StatusOnly's RemoveStatus")
	}
}

// A Dir parses again exactly when a manifest file changes: an edited pod
// is seen at the next call, an unchanged directory is not parsed again,
// and status files (in their subdirectory) change nothing.
func TestDirSeesChangesOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("all.yaml", docs)
	d := NewDir(dir)
	first, err := d.Current()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := d.Current(); again != first {
		t.Fatal("an unchanged directory was parsed again")
	}
	pod, _ := first.Pod(context.Background(), "demo", "web")
	if err := first.PublishStatus(context.Background(), pod, []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	if again, _ := d.Current(); again != first {
		t.Fatal("writing a status file made the directory parse again")
	}
	write("all.yaml", strings.Replace(docs, "net-a\n", "net-a,net-b\n", 1))
	changed, err := d.Current()
	if err != nil {
		t.Fatal(err)
	}
	pod, err = changed.Pod(context.Background(), "demo", "web")
	if err != nil || pod.Annotations["k8s.v1.cni.cncf.io/networks"] != "net-a,net-b" {
		t.Fatalf("edited pod not seen: %+v %v", pod, err)
	}
	write("more.yml", "apiVersion: v1\nkind: Pod\nmetadata: {name: db, namespace: demo}\n")
	added, _ := d.Current()
	if _, err := added.Pod(context.Background(), "demo", "db"); err != nil {
		t.Fatalf("pod of an added file not seen: %v", err)
	}
	os.Remove(filepath.Join(dir, "more.yml"))
	removed, _ := d.Current()
	if _, err := removed.Pod(context.Background(), "demo", "db"); err == nil {
		t.Fatal("pod of a removed file still served")
	}
	write("broken.yaml", "kind: [")
	if _, err := d.Current(); err == nil {
		t.Fatal("a broken manifest was not reported")
	}
}

// published loads dir with the pods and NADs of docs, and web's status
// published.
func published(t *testing.T, dir string) *Source {
	t.Helper()
	write(t, dir, "a.yaml", docs)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := s.Pod(context.Background(), "demo", "web")
	if err := s.PublishStatus(context.Background(), pod, []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	return s
}
