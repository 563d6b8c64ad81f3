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
// own context check is off; without, wazero's check
// (RuntimeConfig.WithCloseOnContextDone) stops the calls. rc's own
// setting of that check is overridden.
//
// This is the only place plexus creates a wazero runtime
// (TestOnlyWasmbinCreatesRuntimes), so that a runtime never runs modules
// without one of the two checks, or with both.
//
// The rewriter exists because wazero's check leaves the compiled code for
// Go at every loop iteration, a cost a long-lived host pays on every call:
// https://github.com/wazero/wazero/issues/2466. Once a wazero release
// checks in the compiled code instead, checked runtimes can use wazero's
// check and AddDeadlineCheck can go (TestWazeroIssue2466,
// BenchmarkWazeroIssue2466).
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
