package explain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/policies"
)

// Options say which pod to explain and with what.
type Options struct {
	// Namespace and Name name a pod in the cluster; PodFile a manifest
	// instead (a pod that does not exist yet).
	Namespace string
	Name      string
	PodFile   string
	// NADFiles are NetworkAttachmentDefinition manifests, looked at
	// before the cluster.
	NADFiles []string
	// Policies are Rego modules, data files and directories, as the
	// plugin config's policy.paths.
	Policies []string
	// PolicyObject names the AttachmentPolicy to decide with when
	// Policies is empty and the pod comes from the cluster.
	PolicyObject string
	// ExtensionsFile is plexus's extensions config (extensions.Config, or
	// a plugin config holding it under "extensions").
	ExtensionsFile string
	// ConfigFile is a plexus config (core/config) to plan with; without it
	// the plan takes the settings the node's PlexusNode reports (Node, else
	// the pod's spec.nodeName), or plexus's defaults.
	ConfigFile string
	// Node asks for the node's side, and names the node whose settings
	// the plan takes.
	Node string
	// Cluster is nil when no kubeconfig was given.
	Cluster *Cluster
}

// Explain builds the report. An error means there is no pod to explain
// (not found, unreadable manifest) or no config to plan with (an
// unreadable --config); everything else is in the report.
func Explain(ctx context.Context, opts Options) (*Report, error) {
	b, err := newBuilder(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer b.close(ctx)
	c, err := b.nodeConfig(ctx)
	if err != nil {
		return nil, err
	}
	b.plan(ctx, c)
	b.lastAdd(ctx)
	b.node(ctx)
	b.r.OK = len(b.r.Problems) == 0
	return b.r, nil
}

// builder carries what the steps share.
type builder struct {
	opts   Options
	r      *Report
	pod    *source.Pod
	obj    *corev1.Pod // nil for a manifest
	nads   *nadReader
	engine *policies.Engine
	// ext is the extensions config as loaded: declarations only, no
	// module is compiled or run.
	ext *extensions.Host
}

func newBuilder(ctx context.Context, opts Options) (*builder, error) {
	b := &builder{opts: opts, r: &Report{Attachments: []Attachment{}, Problems: []string{}, Warnings: []string{}}}
	if err := b.loadPod(ctx); err != nil {
		return nil, err
	}
	nads, err := newNADReader(opts.NADFiles, opts.Cluster)
	if err != nil {
		return nil, err
	}
	b.nads = nads
	b.loadPolicy(ctx)
	b.loadExtensions(ctx)
	return b, nil
}

func (b *builder) loadPod(ctx context.Context) error {
	switch {
	case b.opts.PodFile != "":
		p, err := policies.ReadPodManifest(b.opts.PodFile)
		if err != nil {
			return err
		}
		b.pod, b.r.Pod.From = p, b.opts.PodFile
	case b.opts.Cluster == nil:
		return errors.New("reading a pod from the cluster needs a kubeconfig")
	default:
		obj, p, err := b.opts.Cluster.pod(ctx, b.opts.Namespace, b.opts.Name)
		if err != nil {
			return err
		}
		b.obj, b.pod, b.r.Pod.From = obj, p, "cluster"
		b.r.Pod.Phase = string(obj.Status.Phase)
		if st := obj.Status.StartTime; st != nil && obj.Status.Phase == corev1.PodRunning {
			b.r.Pod.Started = st.UTC().Format(time.RFC3339)
		}
	}
	b.r.Pod.Namespace, b.r.Pod.Name = b.pod.Namespace, b.pod.Name
	b.r.Pod.UID, b.r.Pod.NodeName = b.pod.UID, b.pod.NodeName
	return nil
}

func (b *builder) close(ctx context.Context) {
	if b.ext != nil {
		_ = b.ext.Close(ctx)
	}
}

func (b *builder) problem(format string, args ...any) {
	b.r.Problems = append(b.r.Problems, fmt.Sprintf(format, args...))
}

// warn adds a warning once, however many attachments find it.
func (b *builder) warn(format string, args ...any) {
	if w := fmt.Sprintf(format, args...); !slices.Contains(b.r.Warnings, w) {
		b.r.Warnings = append(b.r.Warnings, w)
	}
}
