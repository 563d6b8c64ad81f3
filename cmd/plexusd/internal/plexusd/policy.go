package plexusd

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/follow"
	"github.com/plexus-cni/plexus/policies/revision"
)

// reloadingPolicy serves decisions from the policy in force and replaces
// it atomically when its files change (polled) or the node verified a new
// revision of its AttachmentPolicy (policies/revision). A change that
// fails keeps the previous policy in force and says so.
type reloadingPolicy struct {
	cfg policies.Config
	// current is the engine in force; nil allows all (onDelete AllowAll).
	current atomic.Pointer[policies.Engine]
	digest  string
	m       *metrics
	log     *slog.Logger
	sync    *revision.Syncer           // nil when the policy is files only
	files   atomic.Pointer[filesState] // a files-only policy's, for NodePolicy
}

type filesState struct {
	digest string
	since  time.Time
	err    string
}

func newReloadingPolicy(ctx context.Context, cfg policies.Config, m *metrics, log *slog.Logger) (*reloadingPolicy, error) {
	r := &reloadingPolicy{cfg: cfg, m: m, log: log}
	if cfg.Object != nil {
		return r, r.startObject(ctx)
	}
	digest, err := digestPaths(cfg.Paths)
	if err != nil {
		return nil, err
	}
	eng, err := policies.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.current.Store(eng)
	r.digest = digest
	r.files.Store(&filesState{digest: digest, since: time.Now()})
	m.policyLoaded.Set(1)
	m.policyRevision.WithLabelValues("", "files", digest[:12]).Set(1)
	r.log.Info("policy loaded", "paths", r.cfg.Paths)
	return r, nil
}

// startObject puts in force what the node's state directory holds.
func (r *reloadingPolicy) startObject(ctx context.Context) error {
	s, err := revision.New(revision.Options{Config: r.cfg, Log: r.log})
	if err != nil {
		return err
	}
	res, err := s.Start(ctx)
	if err != nil {
		return err
	}
	r.sync = s
	r.current.Store(res.Engine)
	r.m.policyLoaded.Set(1)
	r.m.policyRevision.WithLabelValues(s.Name(), res.State.Source, res.State.Revision).Set(1)
	r.log.Info("policy in force", "object", s.Name(), "source", res.State.Source, "revision", res.State.Revision, "err", res.State.Error)
	return nil
}

// observe follows one attempt of the syncer.
func (r *reloadingPolicy) observe(res revision.Result, err error) {
	if err != nil {
		if res.Attempted {
			r.fail(err) // once per refused generation, not per replay
		}
		return
	}
	r.m.policyLoaded.Set(1)
	if res.Changed {
		r.activate(res.Engine, r.sync.Name(), res.State.Source, res.State.Revision)
	}
}

// activate puts eng in force and exports its revision as the only one.
func (r *reloadingPolicy) activate(eng *policies.Engine, object, source, revision string) {
	r.current.Store(eng) // decisions running on the old engine finish on it
	r.m.policyReloads.WithLabelValues("ok").Inc()
	r.m.policyLoaded.Set(1)
	r.m.policyRevision.Reset()
	r.m.policyRevision.WithLabelValues(object, source, revision).Set(1)
}

// NodePolicy is the node's policy in force, as PlexusNode reports it.
func (r *reloadingPolicy) NodePolicy() plexusapi.NodePolicy {
	if r.sync != nil {
		return follow.NodePolicy(r.sync.Name(), r.sync.State())
	}
	fs := r.files.Load()
	return plexusapi.NodePolicy{Source: "files", Revision: fs.digest[:12], Since: metav1.NewTime(fs.since), Error: fs.err}
}

// Authorize implements pipeline.Authorizer, timed and its denials counted.
func (r *reloadingPolicy) Authorize(ctx context.Context, req *pipeline.AuthorizeRequest) (pipeline.Decision, error) {
	start := time.Now()
	d, err := pipeline.Decision{Allowed: true}, error(nil)
	if eng := r.current.Load(); eng != nil {
		d, err = eng.Authorize(ctx, req)
	}
	r.m.decisions.Observe(time.Since(start).Seconds())
	if !d.Allowed || err != nil {
		code := "policy.error"
		if len(d.Reasons) > 0 {
			code = d.Reasons[0].Code
		}
		r.m.denials.WithLabelValues(code).Inc()
	}
	return d, err
}

// NeedsNamespaceLabels implements pipeline.NamespaceLabelsUser.
func (r *reloadingPolicy) NeedsNamespaceLabels() bool {
	eng := r.current.Load()
	return eng != nil && eng.NeedsNamespaceLabels()
}

// watch polls the policy files until ctx ends. Polling, not inotify: a
// ConfigMap volume swaps a symlinked directory, which watchers miss.
func (r *reloadingPolicy) watch(ctx context.Context, every time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		r.reloadIfChanged(ctx)
	}
}

func (r *reloadingPolicy) reloadIfChanged(ctx context.Context) {
	digest, err := digestPaths(r.cfg.Paths)
	if err != nil {
		r.fail(err)
		return
	}
	if digest == r.digest {
		return
	}
	r.digest = digest // a broken version is reported once, not every poll
	eng, err := policies.New(ctx, r.cfg)
	if err != nil {
		r.fail(err)
		return
	}
	r.activate(eng, "", "files", digest[:12])
	r.files.Store(&filesState{digest: digest, since: time.Now()})
	r.log.Info("policy reloaded", "paths", r.cfg.Paths)
}

func (r *reloadingPolicy) fail(err error) {
	if fs := r.files.Load(); fs != nil {
		r.files.Store(&filesState{digest: fs.digest, since: fs.since, err: err.Error()})
	}
	r.m.policyReloads.WithLabelValues("failed").Inc()
	r.m.policyLoaded.Set(0)
	r.log.Error("policy change rejected; the previous policy stays in force", "err", err)
}

// digestPaths hashes the names and contents of the files under paths.
func digestPaths(paths []string) (string, error) {
	files, err := policies.Files(paths)
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
