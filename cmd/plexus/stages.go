package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/policies"
)

// buildStages builds the optional s7.4 policy stage and the extension
// stage from plexus's config; an absent key leaves its stage out.
func buildStages(ctx context.Context, conf *config.Config, _ *slog.Logger) (pipeline.Stages, func(), error) {
	var st pipeline.Stages
	closeAll := func() {}
	if len(conf.Policy) > 0 {
		var pc policies.Config
		if err := json.Unmarshal(conf.Policy, &pc); err != nil {
			return st, nil, fmt.Errorf(`plexus config "policy": %w`, err)
		}
		eng, err := policies.New(ctx, pc)
		if err != nil {
			return st, nil, fmt.Errorf(`plexus config "policy": %w`, err)
		}
		st.Authorizer = eng
	}
	if len(conf.Extensions) > 0 {
		var ec extensions.Config
		if err := json.Unmarshal(conf.Extensions, &ec); err != nil {
			return st, nil, fmt.Errorf(`plexus config "extensions": %w`, err)
		}
		if ec.CacheDir == "" {
			// Thin mode compiles in every process; the cache makes that a read.
			ec.CacheDir = filepath.Join(conf.CacheDir, "extensions")
		}
		host, err := extensions.New(ctx, ec)
		if err != nil {
			return st, nil, fmt.Errorf(`plexus config "extensions": %w`, err)
		}
		st.Preparer, st.Enricher = host, host
		closeAll = func() { _ = host.Close(context.WithoutCancel(ctx)) }
	}
	return st, closeAll, nil
}
