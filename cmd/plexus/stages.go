package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
)

// buildStages builds the optional policy and extension stages.
func buildStages(_ context.Context, conf *config.Config, _ *slog.Logger) (pipeline.Stages, func(), error) {
	if len(conf.Policy) > 0 {
		return pipeline.Stages{}, nil, fmt.Errorf(`"policy" is not supported by this build`)
	}
	if len(conf.Extensions) > 0 {
		return pipeline.Stages{}, nil, fmt.Errorf(`"extensions" is not supported by this build`)
	}
	return pipeline.Stages{}, func() {}, nil
}
