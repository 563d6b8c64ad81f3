package wasmbin

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// NewRuntime creates a wazero runtime whose calls end when their context
// does. With checked, every module compiled on it must carry
// AddDeadlineCheck's check, which the runtime's tick serves, and wazero's
// context check (RuntimeConfig.WithCloseOnContextDone, overriding rc's) is
// off; without, wazero's check stops the calls. It is the only place plexus
// creates a runtime (TestOnlyWasmbinCreatesRuntimes), so that none runs
// modules with neither check, or both.
//
// The rewriter exists because wazero's check leaves the compiled code at
// every loop iteration, a cost a long-lived host pays on every call
// (https://github.com/wazero/wazero/issues/2466); once wazero checks in
// the compiled code, AddDeadlineCheck can go (TestWazeroIssue2466).
func NewRuntime(ctx context.Context, rc wazero.RuntimeConfig, checked bool) (wazero.Runtime, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(!checked))
	if !checked {
		return rt, nil
	}
	_, err := rt.NewHostModuleBuilder(TickModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(tick), nil, nil).Export(TickFunc).Instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("providing %s.%s: %w", TickModule, TickFunc, err)
	}
	return rt, nil
}

// tick is the call AddDeadlineCheck's countdown makes: it ends a call
// whose context has ended. Returning to Go also lets the scheduler and
// the garbage collector run.
func tick(ctx context.Context, _ api.Module, _ []uint64) {
	if err := ctx.Err(); err != nil {
		panic(err)
	}
}
