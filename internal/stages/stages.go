// Package stages builds plexus's optional pipeline stages, the s7.4 policy
// engine and the extension host, from the plugin config; the plugin and
// plexusd share it.
package stages

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/policies"
)

// Build builds the optional s7.4 policy stage and the extension stage from
// plexus's config; an absent key leaves its stage out.
func Build(ctx context.Context, conf *config.Config, _ *slog.Logger) (pipeline.Stages, func(), error) {
	var st pipeline.Stages
	closeAll := func() {}
	if len(conf.Policy) > 0 {
		pc, err := PolicyConfig(conf)
		if err != nil {
			return st, nil, err
		}
		eng, err := policies.New(ctx, pc)
		if err != nil {
			return st, nil, fmt.Errorf(`plexus config "policy": %w`, err)
		}
		st.Authorizer = eng
	}
	if len(conf.Extensions) > 0 {
		host, err := Extensions(ctx, conf, false)
		if err != nil {
			return st, nil, err
		}
		st.Preparer, st.Enricher = host, host
		closeAll = func() { _ = host.Close(context.WithoutCancel(ctx)) }
	}
	return st, closeAll, nil
}

// PolicyConfig decodes the "policy" key.
func PolicyConfig(conf *config.Config) (policies.Config, error) {
	var pc policies.Config
	if err := config.Unmarshal(conf.Policy, &pc); err != nil {
		return pc, fmt.Errorf(`plexus config "policy": %w`, err)
	}
	return pc, nil
}

// Extensions builds the extension host from the "extensions" key;
// longLived is plexusd's (extensions.Config.LongLived).
func Extensions(ctx context.Context, conf *config.Config, longLived bool) (*extensions.Host, error) {
	var ec extensions.Config
	if err := config.Unmarshal(conf.Extensions, &ec); err != nil {
		return nil, fmt.Errorf(`plexus config "extensions": %w`, err)
	}
	ec.LongLived = longLived
	if ec.CacheDir == "" {
		// Thin mode compiles in every process; the cache makes that a read.
		ec.CacheDir = filepath.Join(conf.CacheDir, "extensions")
	}
	host, err := extensions.New(ctx, ec)
	if err != nil {
		return nil, fmt.Errorf(`plexus config "extensions": %w`, err)
	}
	return host, nil
}
