package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/core/source"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/push"
	"github.com/plexus-cni/plexus/policies/revision"
	"github.com/plexus-cni/plexus/sdk/abi"
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
	if b.src, err = newPlanSource(b.pod, opts.NADFiles, opts.Cluster); err != nil {
		return nil, err
	}
	b.loadPolicy(ctx)
	b.loadExtensions(ctx)
	if b.ext != nil {
		defer b.ext.Close(ctx)
	}
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
	src    *planSource
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

func (b *builder) problem(format string, args ...any) {
	b.r.Problems = append(b.r.Problems, fmt.Sprintf(format, args...))
}

// warn adds a warning once, however many attachments find it.
func (b *builder) warn(format string, args ...any) {
	if w := fmt.Sprintf(format, args...); !slices.Contains(b.r.Warnings, w) {
		b.r.Warnings = append(b.r.Warnings, w)
	}
}

// NoPolicyNote is said when no --policy is given.
const NoPolicyNote = "no policy given: plexus allows every attachment when none is configured"

// DefaultPolicyObject is the AttachmentPolicy deploy/'s nodes follow.
const DefaultPolicyObject = "cluster"

// loadPolicy compiles the policy once, as plexus does at start (s7.4).
func (b *builder) loadPolicy(ctx context.Context) {
	p := &b.r.Policy
	if len(b.opts.Policies) == 0 {
		b.loadPolicyObject(ctx)
		return
	}
	p.Given, p.Paths = true, b.opts.Policies
	e, err := policies.New(ctx, policies.Config{
		Paths: b.opts.Policies,
		// Offline there is no ADD waiting: allow the longest deadline.
		Deadline: policies.Duration(policies.MaxDeadline),
	})
	if err != nil {
		p.Error = err.Error()
		b.problem("policy: %v: plexus would not start with it", err)
		return
	}
	b.engine = e
}

// loadPolicyObject decides as the nodes do without --policy: with the
// AttachmentPolicy opts.PolicyObject and the built-in rule library (its
// files verified as a node verifies a revision), or the baseline while no
// such object exists. The report names the revision, to compare with what
// each node activated (--node).
func (b *builder) loadPolicyObject(ctx context.Context) {
	name, p := b.opts.PolicyObject, &b.r.Policy
	if name == "" || b.opts.Cluster == nil {
		p.Note = NoPolicyNote
		return
	}
	p.Given, p.Object = true, name
	obj, err := b.opts.Cluster.Plexus.PlexusV1alpha1().AttachmentPolicies().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p.ObjectMissing = true
		p.Note = fmt.Sprintf("AttachmentPolicy %q not found: decided with the image's baseline, which a node enforces until an object exists; "+
			"a node that enforced a revision of a deleted %q keeps it (onDelete Keep) until plexus is uninstalled there with PLEXUS_UNINSTALL=true: --node says which", name, name)
	case err != nil:
		p.Error = fmt.Sprintf("reading AttachmentPolicy %q: %v", name, err)
		b.problem("policy: %s", p.Error)
		return
	}
	dir, err := os.MkdirTemp("", "plexus-explain-policy-")
	if err != nil {
		p.Error = err.Error()
		return
	}
	// The engine keeps nothing of the files once compiled.
	defer os.RemoveAll(dir)
	library, baseline, err := policies.WriteBaseline(dir)
	switch {
	case err != nil:
		p.Error = err.Error()
	case p.ObjectMissing:
		if b.engine, err = policies.New(ctx, policies.Config{Paths: []string{library, baseline}}); err != nil {
			p.Error = err.Error()
			b.problem("policy: the built-in baseline: %v", err)
		}
	default:
		files, err := revision.SpecFiles(obj)
		if err == nil {
			p.Revision = revision.Revision(obj.Generation, files) // as nodes report it
			b.engine, _, err = push.Verify(ctx, library, files, "(the object)")
		}
		if err != nil {
			p.Error = fmt.Sprintf("AttachmentPolicy %q: %v", obj.Name, err)
			b.problem("policy: %s: nodes refuse this revision and keep the one in force", p.Error)
		}
	}
}

// decision is the s7.4 policy's answer for an attachment, as the plan
// asked it (the pipeline's own Authorize call, so the same input).
func (b *builder) decision(a *pipeline.Planned) *Decision {
	switch {
	case !b.r.Policy.Given:
		return &Decision{Allowed: true, Note: NoPolicyNote}
	case b.engine == nil:
		return &Decision{Note: "the policy did not compile"}
	case a.Decision != nil:
		return &Decision{Evaluated: true, Allowed: a.Decision.Allowed, Reasons: a.Decision.Reasons}
	case !a.Origin.ChosenByPod():
		return &Decision{Allowed: true, Note: "not asked: the admin chose this network; the policy decides on the pod's choices (s7.4)"}
	}
	return &Decision{Note: "not asked: the network fails before the policy decides"}
}

// loadExtensions reads the config and the modules' declarations as plexus
// does at start (extensions.New).
func (b *builder) loadExtensions(ctx context.Context) {
	x := &b.r.Extensions
	if b.opts.ExtensionsFile == "" {
		return
	}
	x.Given, x.File = true, b.opts.ExtensionsFile
	cfg, err := readExtensionsConfig(b.opts.ExtensionsFile)
	if err != nil {
		x.Error = err.Error()
		b.problem("extensions: %v", err)
		return
	}
	x.UnownedKeys = cmp.Or(cfg.UnownedKeys, extensions.PolicyIgnore)
	cfg.CacheDir = "" // explain compiles nothing; never create the node's cache
	h, err := extensions.New(ctx, cfg)
	if err != nil {
		x.Error = err.Error()
		b.problem("extensions: %v: the thin plugin fails every ADD with this config; plexusd refuses the failing module and serves with the rest", err)
		return
	}
	b.ext = h
	for i, d := range h.Declarations() {
		x.Modules = append(x.Modules, Module{Name: d.Name, Path: cfg.Modules[i].Path, Prefixes: d.Prefixes, Hooks: d.Hooks})
	}
}

// readExtensionsConfig takes extensions.Config ({"modules": [...]}) or a
// plugin config holding it under "extensions".
func readExtensionsConfig(path string) (extensions.Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return extensions.Config{}, fmt.Errorf("reading extensions config: %w", err)
	}
	var probe map[string]json.RawMessage
	var cfg extensions.Config
	if err = json.Unmarshal(raw, &probe); err == nil {
		if _, ok := probe["extensions"]; ok {
			cfg, err = extensions.ParseConfig(raw)
		} else {
			err = config.Unmarshal(raw, &cfg)
		}
	}
	if err != nil {
		return cfg, fmt.Errorf("extensions config %s: %w", path, err)
	}
	return cfg, nil
}

// ownKey says which module owns a reverse-domain key (s4.1.2.1) of a, and
// what the plan did with it.
func (b *builder) ownKey(out *Attachment, key string, a *pipeline.Planned) Key {
	k := Key{Key: key}
	at := fmt.Sprintf("selection element %d (%s): key %q", out.Index, out.Network, key)
	if b.ext == nil {
		k.Outcome = "no extensions config given (--extensions): without extensions plexus ignores the key"
		if b.r.Extensions.Given {
			k.Outcome = "the extensions config did not load"
		}
		b.warn("%s: %s", at, k.Outcome)
		return k
	}
	for _, d := range b.ext.Declarations() {
		for _, p := range d.Prefixes {
			if !extensions.Owns(p, key) {
				continue
			}
			k.Module, k.Prefix = d.Name, p
			k.Outcome = fmt.Sprintf("module %q (prefix %q) prepares the attachment with it", d.Name, p)
			if !d.Has(abi.HookPrepare) {
				k.Outcome = fmt.Sprintf("module %q (prefix %q) owns it but has no prepare hook: the key does not change the attachment", d.Name, p)
				b.warn("%s: %s", at, k.Outcome)
			}
			return k
		}
	}
	if _, ignored := a.Ignored[key]; ignored || b.r.Extensions.UnownedKeys != extensions.PolicyFail {
		k.Outcome = "no extension owns it: ignored with a warning (it would fail with unownedKeys: fail)"
		b.warn("%s: %s", at, k.Outcome)
		return k
	}
	k.Outcome = "no extension owns it: the ADD fails (unownedKeys: fail)"
	return k
}
