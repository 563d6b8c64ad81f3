// Package manifests is the standalone source: Pods and
// NetworkAttachmentDefinitions from YAML files in a directory, status
// written to files beside them. For hosts without Kubernetes and the demo.
package manifests

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/core/source"
)

// StatusDir is the subdirectory holding each pod's network-status document.
const StatusDir = "status"

// maxFileBytes bounds one manifest file.
const maxFileBytes = 4 << 20

// Source reads every *.yaml and *.yml file of Dir (not subdirectories) once.
type Source struct {
	Dir  string
	pods map[string]*source.Pod
	nads map[string]*source.NAD
}

// Load reads the directory.
func Load(dir string) (*Source, error) {
	s := &Source{Dir: dir, pods: map[string]*source.Pod{}, nads: map[string]*source.NAD{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	for _, e := range entries { // in name order
		if !isManifest(e) {
			continue
		}
		if err := s.loadFile(filepath.Join(dir, e.Name())); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// StatusOnly is the source of a call that reads no pod or NAD (DEL, which
// only removes the pod's status file): it reads no manifest, so a broken
// one cannot keep a DEL from removing the status.
func StatusOnly(dir string) *Source {
	return &Source{Dir: dir, pods: map[string]*source.Pod{}, nads: map[string]*source.NAD{}}
}

func isManifest(e os.DirEntry) bool {
	ext := filepath.Ext(e.Name())
	return e.Type().IsRegular() && (ext == ".yaml" || ext == ".yml")
}

func (s *Source) loadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("manifests: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(io.LimitReader(f, maxFileBytes))
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("manifests: %s document %d: %w", path, i, err)
		}
		if doc == nil {
			continue
		}
		if err := s.add(doc); err != nil {
			return fmt.Errorf("manifests: %s document %d: %w", path, i, err)
		}
	}
}

// add keeps Pods and NADs and ignores other kinds.
func (s *Source) add(doc map[string]any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	kind, _ := doc["kind"].(string)
	switch kind {
	case "Pod":
		return s.addPod(b)
	case "NetworkAttachmentDefinition":
		return s.addNAD(b)
	}
	return nil
}

func (s *Source) addPod(b []byte) error {
	var m source.PodObject
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("Pod: %w", err)
	}
	pod := m.Pod()
	pod.Namespace = cmp.Or(pod.Namespace, "default")
	if err := cmp.Or(names.Label("Pod namespace", pod.Namespace), names.Subdomain("Pod name", pod.Name)); err != nil {
		return err
	}
	s.pods[pod.Namespace+"/"+pod.Name] = pod
	return nil
}

func (s *Source) addNAD(b []byte) error {
	var n source.NAD
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("NetworkAttachmentDefinition: %w", err)
	}
	n.Namespace = cmp.Or(n.Namespace, "default")
	if err := cmp.Or(names.Label("NetworkAttachmentDefinition namespace", n.Namespace), names.Label("NetworkAttachmentDefinition name", n.Name)); err != nil {
		return err
	}
	s.nads[n.Namespace+"/"+n.Name] = &n
	return nil
}

// Pod implements source.Source.
func (s *Source) Pod(_ context.Context, namespace, name string) (*source.Pod, error) {
	if p, ok := s.pods[namespace+"/"+name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("in manifests %s: %w", s.Dir, source.NotFound("Pod", namespace, name))
}

// NAD implements source.Source.
func (s *Source) NAD(_ context.Context, namespace, name string) (*source.NAD, error) {
	if n, ok := s.nads[namespace+"/"+name]; ok {
		return n.DeepCopy(), nil
	}
	return nil, fmt.Errorf("in manifests %s: %w", s.Dir, source.NotFound("NetworkAttachmentDefinition", namespace, name))
}

// StatusPath is where a pod's network-status is written. Namespace and
// name are validated DNS-1123 names, so they cannot form another path.
func (s *Source) StatusPath(namespace, name string) (string, error) {
	if err := cmp.Or(names.Label("Pod namespace", namespace), names.Subdomain("Pod name", name)); err != nil {
		return "", err
	}
	return filepath.Join(s.Dir, StatusDir, namespace+"_"+name+".json"), nil
}

// PublishStatus writes the status document atomically.
func (s *Source) PublishStatus(_ context.Context, pod *source.Pod, doc []byte) error {
	p, err := s.StatusPath(pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(doc, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// RemoveStatus deletes the pod's status file on DEL.
func (s *Source) RemoveStatus(_ context.Context, namespace, name string) error {
	p, err := s.StatusPath(namespace, name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Dir serves plexusd from a manifests directory, parsing the files again
// only when one changed: parsing them all costs more than a call's reads.
type Dir struct {
	path  string
	mu    sync.Mutex
	stamp string
	src   *Source
}

// NewDir returns a Dir for path; nothing is read until Current.
func NewDir(path string) *Dir { return &Dir{path: path} }

// Current returns the directory's manifests: the last parse unless a file
// was added, removed or modified (name, size, modification time).
func (d *Dir) Current() (*Source, error) {
	stamp, err := dirStamp(d.path)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.src != nil && stamp == d.stamp {
		return d.src, nil
	}
	src, err := Load(d.path)
	if err != nil {
		return nil, err
	}
	d.src, d.stamp = src, stamp
	return src, nil
}

func dirStamp(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("manifests: %w", err)
	}
	var b strings.Builder
	for _, e := range entries {
		if !isManifest(e) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return "", fmt.Errorf("manifests: %w", err)
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String(), nil
}
