package policies

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/nad"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/source"
)

// EvalOptions describe one offline decision ("plexusctl policy eval").
type EvalOptions struct {
	PodFile string // a Pod manifest (YAML or JSON)
	NADFile string // a NetworkAttachmentDefinition manifest
	// Selection is one element as the user would write it in the
	// annotation (a JSON object); empty means the first element of the
	// pod's annotation that names the NAD.
	Selection string
	// NamespaceLabels are the pod namespace's labels; nil means unknown.
	NamespaceLabels map[string]string
	Policies        []string // policy paths, as Config.Paths
	Data            []string // more data paths, loaded like Policies
	Query           string
	Deadline        time.Duration
}

// EvalResult is the input document and the decision made on it.
type EvalResult struct {
	Input    map[string]any    `json:"input"`
	Decision pipeline.Decision `json:"decision"`
}

// Eval makes the decision the engine would make for the pod and NAD in the
// given manifests, the same way it would on the node.
func Eval(ctx context.Context, opts EvalOptions) (*EvalResult, error) {
	req, err := evalRequest(opts)
	if err != nil {
		return nil, err
	}
	e, err := New(ctx, Config{
		Paths: append(append([]string{}, opts.Policies...), opts.Data...),
		Query: opts.Query,
		// Offline there is no ADD waiting, so allow the longest deadline.
		Deadline: Duration(cmpDuration(opts.Deadline, MaxDeadline)),
	})
	if err != nil {
		return nil, err
	}
	in, err := BuildInput(req)
	if err != nil {
		return nil, err
	}
	return &EvalResult{Input: in, Decision: e.Decide(ctx, in)}, nil
}

func evalRequest(opts EvalOptions) (*pipeline.AuthorizeRequest, error) {
	pod, err := ReadPodManifest(opts.PodFile)
	if err != nil {
		return nil, err
	}
	nads, err := ReadNADManifests(opts.NADFile)
	if err != nil {
		return nil, err
	}
	if len(nads) != 1 {
		return nil, fmt.Errorf("NAD manifest %s holds %d NADs: policy eval decides one attachment, give a file with one", opts.NADFile, len(nads))
	}
	n := nads[0]
	el, all, err := evalSelection(pod, n, opts.Selection)
	if err != nil {
		return nil, err
	}
	// The pipeline owns interface naming; an offline preview mirrors its
	// usual "net<position>".
	ifName := cmp.Or(el.Interface, fmt.Sprintf("net%d", el.Index+1))
	return &pipeline.AuthorizeRequest{
		Pod:             pod,
		NamespaceLabels: opts.NamespaceLabels,
		Selections:      all,
		Attachment: &pipeline.Attachment{
			Index: el.Index, Selection: el, NAD: n, Name: el.Ref(), IfName: ifName,
			Config: json.RawMessage(n.Spec.Config),
		},
	}, nil
}

// evalSelection finds the element to decide on and all of the pod's; one
// given explicitly takes the index of its equal in the pod's annotation.
func evalSelection(pod *source.Pod, n *source.NAD, explicit string) (*selection.Element, []*selection.Element, error) {
	compat := config.DefaultParseOptions()
	res, err := selection.ParseWith(pod.Annotations[selection.Annotation], pod.Namespace, compat)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s: %w", pod.Ref(), err)
	}
	if explicit == "" {
		for _, el := range res.Elements {
			if el.Namespace == n.Namespace && el.Name == n.Name {
				return el, res.Elements, nil
			}
		}
		return nil, nil, fmt.Errorf("pod %s does not select network %s/%s in its %s annotation; pass --selection",
			pod.Ref(), n.Namespace, n.Name, selection.Annotation)
	}
	one, err := selection.ParseWith("["+explicit+"]", pod.Namespace, compat)
	if err != nil {
		return nil, nil, fmt.Errorf("--selection: %w", err)
	}
	el := one.Elements[0]
	if el.Namespace != n.Namespace || el.Name != n.Name {
		return nil, nil, fmt.Errorf("--selection names %s, but the NAD is %s/%s", el.Ref(), n.Namespace, n.Name)
	}
	for _, other := range res.Elements {
		if sameElement(el, other) {
			return other, res.Elements, nil
		}
	}
	if len(res.Elements) == 0 {
		return el, one.Elements, nil
	}
	return el, res.Elements, nil
}

func sameElement(a, b *selection.Element) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a.Raw) == nil && json.Compact(&cb, b.Raw) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// podManifest is the part of a Pod manifest the policy input uses.
type podManifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Namespace   string            `yaml:"namespace"`
		Name        string            `yaml:"name"`
		UID         string            `yaml:"uid"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		ServiceAccountName string `yaml:"serviceAccountName"`
		NodeName           string `yaml:"nodeName"`
	} `yaml:"spec"`
}

// ReadPodManifest reads a Pod manifest; a missing namespace is "default",
// as the API server would make it.
func ReadPodManifest(path string) (*source.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading pod manifest: %w", err)
	}
	var m podManifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", path, err)
	}
	if m.Kind != "" && m.Kind != "Pod" {
		return nil, fmt.Errorf("pod manifest %s: kind is %q, not Pod", path, m.Kind)
	}
	if m.Metadata.Name == "" {
		return nil, fmt.Errorf("pod manifest %s: metadata.name is empty", path)
	}
	return &source.Pod{
		Namespace: cmp.Or(m.Metadata.Namespace, "default"), Name: m.Metadata.Name, UID: m.Metadata.UID,
		Labels: m.Metadata.Labels, Annotations: m.Metadata.Annotations,
		ServiceAccountName: m.Spec.ServiceAccountName, NodeName: m.Spec.NodeName,
	}, nil
}

// maxNADDocuments bounds the documents read from one manifest file.
const maxNADDocuments = 1000

// ReadNADManifests reads every NetworkAttachmentDefinition of a manifest
// file (YAML documents, or one JSON object) through JSON into the s3.2
// type, so YAML and JSON decode alike. Errors name the document's position.
func ReadNADManifests(path string) ([]*source.NAD, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading NAD manifest: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []*source.NAD
	for i := 1; ; i++ {
		var doc any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("NAD manifest %s, document %d: %w", path, i, err)
		}
		if doc == nil {
			continue // an empty document
		}
		if i > maxNADDocuments {
			return nil, fmt.Errorf("NAD manifest %s: over %d documents", path, maxNADDocuments)
		}
		n, err := nadFromDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("NAD manifest %s, document %d: %w", path, i, err)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("NAD manifest %s: no document", path)
	}
	return out, nil
}

func nadFromDocument(doc any) (*source.NAD, error) {
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var n nad.NetworkAttachmentDefinition
	if err := json.Unmarshal(j, &n); err != nil {
		return nil, err
	}
	if n.Kind != "" && n.Kind != nad.Kind {
		return nil, fmt.Errorf("kind is %q, not %s", n.Kind, nad.Kind)
	}
	if n.Name == "" {
		return nil, fmt.Errorf("metadata.name is empty")
	}
	n.Namespace = cmp.Or(n.Namespace, "default")
	return &n, nil
}
