// Package stages builds plexus's optional pipeline stages, the s7.4 policy
// engine and the extension host, from the plugin config; the plugin and
// plexusd share it.
package stages

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/policies"
)

// Options say how long the stages live: one ADD (the zero value) or plexusd's life.
type Options struct {
	// LongLived stages serve many calls (plexusd): extension modules are
	// compiled for repeated calls and loaded now, a failing one refused
	// alone (extensions.Config.LongLived, Isolate).
	LongLived bool
	// Authorizer, when set, replaces policies.New (plexusd's reloads).
	Authorizer func(ctx context.Context, pc policies.Config) (pipeline.Authorizer, error)
}

// Build builds the stages plexus's config names; closeAll releases them.
func (o Options) Build(ctx context.Context, conf *config.Config) (st pipeline.Stages, closeAll func(), err error) {
	closeAll = func() {}
	if len(conf.Policy) > 0 {
		if st.Authorizer, err = o.policy(ctx, conf); err != nil {
			return st, nil, err
		}
	}
	if len(conf.Extensions) > 0 {
		host, err := o.extensions(ctx, conf)
		if err != nil {
			return st, nil, err
		}
		st.Preparer, st.Enricher = host, host
		closeAll = func() { _ = host.Close(context.WithoutCancel(ctx)) }
	}
	return st, closeAll, nil
}

func (o Options) policy(ctx context.Context, conf *config.Config) (a pipeline.Authorizer, err error) {
	var pc policies.Config
	if err := config.Unmarshal(conf.Policy, &pc); err != nil {
		return nil, fmt.Errorf(`plexus config "policy": %w`, err)
	}
	if o.Authorizer != nil {
		a, err = o.Authorizer(ctx, pc)
	} else {
		a, err = policies.New(ctx, pc)
	}
	if err != nil {
		return nil, fmt.Errorf(`plexus config "policy": %w`, err)
	}
	return a, nil
}

func (o Options) extensions(ctx context.Context, conf *config.Config) (*extensions.Host, error) {
	var ec extensions.Config
	if err := config.Unmarshal(conf.Extensions, &ec); err != nil {
		return nil, fmt.Errorf(`plexus config "extensions": %w`, err)
	}
	ec.LongLived, ec.Isolate = o.LongLived, o.LongLived
	if ec.CacheDir == "" {
		// The plugin compiles in every process; the cache makes that a read.
		ec.CacheDir = filepath.Join(conf.CacheDir, "extensions")
	}
	host, err := extensions.New(ctx, ec)
	if err != nil {
		return nil, fmt.Errorf(`plexus config "extensions": %w`, err)
	}
	if !o.LongLived {
		return host, nil
	}
	if err := host.LoadAll(ctx); err != nil {
		_ = host.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("loading extension modules: %w", err)
	}
	return host, nil
}
