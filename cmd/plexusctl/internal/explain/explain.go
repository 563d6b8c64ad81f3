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
	// Namespace and Name name a pod in the cluster; PodFile a manifest.
	Namespace string
	Name      string
	PodFile   string
	// NADFiles are NAD manifests, looked at before the cluster.
	NADFiles []string
	// Policies are as the plugin config's policy.paths.
	Policies []string
	// PolicyObject is the AttachmentPolicy to decide with without Policies.
	PolicyObject string
	// ExtensionsFile is extensions.Config, or a plugin config holding it.
	ExtensionsFile string
	// ConfigFile is a plexus config to plan with, instead of the settings
	// the node's PlexusNode reports or plexus's defaults.
	ConfigFile string
	// Node asks for the node's side, and whose settings the plan takes.
	Node string
	// Cluster is nil when no kubeconfig was given.
	Cluster *Cluster
}

// Explain builds the report. An error means there is no pod to explain or
// no config to plan with; everything else is in the report.
func Explain(ctx context.Context, opts Options) (*Report, error) {
	b := &builder{opts: opts, r: &Report{Attachments: []Attachment{}, Problems: []string{}, Warnings: []string{}}}
	if err := b.loadPod(ctx); err != nil {
		return nil, err
	}
	var err error
	if b.nads, err = newNADReader(opts.NADFiles, opts.Cluster); err != nil {
		return nil, err
	}
	b.loadPolicy(ctx)
	b.loadExtensions(ctx)
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

type builder struct {
	opts   Options
	r      *Report
	pod    *source.Pod
	obj    *corev1.Pod // nil for a manifest
	nads   *nadReader
	engine *policies.Engine
	ext    *extensions.Host // declarations only: nothing compiled or run
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
