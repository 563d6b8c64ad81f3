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

	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/policies"
)

// reloadingPolicy serves decisions from the last policy that compiled and
// replaces it when its files change. A change that does not compile keeps
// the previous policy in force and says so (log, metric).
type reloadingPolicy struct {
	cfg     policies.Config
	current atomic.Pointer[policies.Engine]
	digest  string
	m       *metrics
	log     *slog.Logger
}

func newReloadingPolicy(ctx context.Context, cfg policies.Config, m *metrics, log *slog.Logger) (*reloadingPolicy, error) {
	r := &reloadingPolicy{cfg: cfg, m: m, log: log}
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
	m.policyLoaded.Set(1)
	r.log.Info("policy loaded", "paths", r.cfg.Paths)
	return r, nil
}

// Authorize implements pipeline.Authorizer.
func (r *reloadingPolicy) Authorize(ctx context.Context, req *pipeline.AuthorizeRequest) (pipeline.Decision, error) {
	return r.current.Load().Authorize(ctx, req)
}

// NeedsNamespaceLabels implements pipeline.NamespaceLabelsUser.
func (r *reloadingPolicy) NeedsNamespaceLabels() bool {
	return r.current.Load().NeedsNamespaceLabels()
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
	// Decisions still running on the old engine finish on it; the garbage
	// collector frees it after them.
	r.current.Store(eng)
	r.m.policyReloads.WithLabelValues("ok").Inc()
	r.m.policyLoaded.Set(1)
	r.log.Info("policy reloaded", "paths", r.cfg.Paths)
}

func (r *reloadingPolicy) fail(err error) {
	r.m.policyReloads.WithLabelValues("failed").Inc()
	r.m.policyLoaded.Set(0)
	r.log.Error("policy change rejected; the previous policy stays in force", "err", err)
}

// digestPaths hashes the names and contents of the policy and data files
// the engine reads under paths (policies.Files: the loader's own walk).
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
