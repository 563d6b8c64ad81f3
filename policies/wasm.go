package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/plexus-cni/plexus/internal/wasmbin"
)

// wasmMaxPages caps one policy instance's memory (64 KiB pages): the admin
// data, one input document and the evaluation's values must fit. A policy
// that needs more fails to decide, which denies (fail closed).
const wasmMaxPages = 512

// wasmPolicy runs a policy compiled by compileWasm in wazero. Instances
// are pooled: one evaluates one decision at a time, and a decision that
// fails (a trap, an abort, a deadline) discards its instance.
type wasmPolicy struct {
	rt      wazero.Runtime
	env     wazero.CompiledModule
	policy  wazero.CompiledModule
	program *wasmProgram
	data    []byte // the admin data as JSON
	caps    *ast.Capabilities
	idle    chan *wasmInstance
}

func newWasmPolicy(ctx context.Context, prog *wasmProgram, data map[string]any) (*wasmPolicy, error) {
	dataJSON, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encoding policy data: %w", err)
	}
	// The policy is the admin's code, but a decision must still stay in its
	// memory, and end at its deadline (wasmbin.AddDeadlineCheck, not
	// wazero's WithCloseOnContextDone, which costs more than the decision).
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(wasmMaxPages))
	p := &wasmPolicy{rt: rt, program: prog, data: dataJSON, caps: Capabilities(), idle: make(chan *wasmInstance, runtime.GOMAXPROCS(0)*2)}
	if err := p.compile(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	// One instance up front: it proves the module instantiates and loads the
	// data, and the first decision does not pay for it.
	in, err := p.newInstance(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	p.idle <- in
	return p, nil
}

func (p *wasmPolicy) compile(ctx context.Context) error {
	fns := p.rt.NewHostModuleBuilder(hostModuleName)
	fns.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostAbort),
		[]api.ValueType{api.ValueTypeI32}, nil).Export("opa_abort")
	fns.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
		[]api.ValueType{api.ValueTypeI32}, nil).Export("opa_println") // print is compiled out
	for _, f := range envImports[2:] {
		params := make([]api.ValueType, f.params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		fns.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostBuiltin),
			params, []api.ValueType{api.ValueTypeI32}).Export(f.name)
	}
	if _, err := fns.Instantiate(ctx); err != nil {
		return fmt.Errorf("policy host functions: %w", err)
	}
	_, err := p.rt.NewHostModuleBuilder(wasmbin.TickModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostTick), nil, nil).Export(wasmbin.TickFunc).Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("policy deadline check: %w", err)
	}
	env, err := p.rt.CompileModule(ctx, envModule(2, wasmMaxPages))
	if err != nil {
		return fmt.Errorf("policy memory module: %w", err)
	}
	policy, err := p.rt.CompileModule(ctx, p.program.binary)
	if err != nil {
		return fmt.Errorf("compiling the policy's Wasm: %w", err)
	}
	p.env, p.policy = env, policy
	return nil
}

// close releases the runtime; instances in use fail their decision.
func (p *wasmPolicy) close(ctx context.Context) error { return p.rt.Close(ctx) }

// decide evaluates the entrypoint over input (JSON) and returns the result
// set as JSON: [] when undefined, [{"result": value}] otherwise.
func (p *wasmPolicy) decide(ctx context.Context, input []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // before taking an instance, which stays clean
	}
	var in *wasmInstance
	select {
	case in = <-p.idle:
	default:
		var err error
		if in, err = p.newInstance(ctx); err != nil {
			return nil, err
		}
	}
	out, err := in.eval(ctx, input)
	if err != nil {
		_ = in.close(context.WithoutCancel(ctx)) // its state is unknown now
		return nil, err
	}
	select {
	case p.idle <- in:
	default:
		_ = in.close(ctx)
	}
	return out, nil
}

// wasmInstance is one instantiated policy with its own memory and the
// admin data loaded into it.
type wasmInstance struct {
	env, mod                          api.Module
	mem                               api.Memory
	opaEval, jsonDump, valueDump      api.Function
	malloc, jsonParse, valueParse     api.Function
	builtins                          map[uint32]string // id → OPA built-in
	hosted                            map[uint32]bool   // ids of the regex and glob aliases
	entrypoint, dataAddr, dataHeapPtr uint32
	caps                              *ast.Capabilities
	failure                           error // why the host stopped the current evaluation
}

type instanceKey struct{}

func (p *wasmPolicy) newInstance(ctx context.Context) (*wasmInstance, error) {
	env, err := p.rt.InstantiateModule(ctx, p.env, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, fmt.Errorf("instantiating policy memory: %w", err)
	}
	rctx := experimental.WithImportResolver(ctx, func(name string) api.Module {
		if name == "env" {
			return env
		}
		return nil
	})
	mod, err := p.rt.InstantiateModule(rctx, p.policy, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		_ = env.Close(ctx)
		return nil, fmt.Errorf("instantiating the policy's Wasm: %w", err)
	}
	in := &wasmInstance{env: env, mod: mod, mem: env.Memory(), caps: p.caps}
	if err := in.bind(); err != nil {
		_ = in.close(ctx)
		return nil, err
	}
	if err := in.init(ctx, p.program, p.data); err != nil {
		_ = in.close(ctx)
		return nil, err
	}
	return in, nil
}

func (in *wasmInstance) close(ctx context.Context) error {
	return errors.Join(in.mod.Close(ctx), in.env.Close(ctx))
}

// bind looks the ABI's exports up once: a lookup allocates.
func (in *wasmInstance) bind() error {
	for name, fn := range map[string]*api.Function{
		"opa_eval": &in.opaEval, "opa_json_dump": &in.jsonDump, "opa_value_dump": &in.valueDump,
		"opa_malloc": &in.malloc, "opa_json_parse": &in.jsonParse, "opa_value_parse": &in.valueParse,
	} {
		if *fn = in.mod.ExportedFunction(name); *fn == nil {
			return fmt.Errorf("the policy's Wasm does not export %s (OPA Wasm ABI 1.2 or later needed)", name)
		}
	}
	return nil
}

// init reads the built-in and entrypoint tables and loads the data, then
// remembers where the heap stands: every evaluation starts over from there.
func (in *wasmInstance) init(ctx context.Context, prog *wasmProgram, data []byte) error {
	var builtinIDs, entrypoints map[string]uint32
	if err := in.exportedJSON(ctx, "builtins", &builtinIDs); err != nil {
		return err
	}
	if err := in.exportedJSON(ctx, "entrypoints", &entrypoints); err != nil {
		return err
	}
	in.builtins, in.hosted = map[uint32]string{}, map[uint32]bool{}
	for name, id := range builtinIDs {
		if real, ok := prog.hosted[name]; ok {
			name = real
			in.hosted[id] = true
		}
		in.builtins[id] = name
	}
	ep, ok := entrypoints[prog.entrypoint]
	if !ok {
		return fmt.Errorf("the policy's Wasm has no entrypoint %s", prog.entrypoint)
	}
	in.entrypoint = ep
	addr, err := in.store(ctx, data, in.jsonParse)
	if err != nil {
		return fmt.Errorf("loading policy data: %w", err)
	}
	in.dataAddr = addr
	if stash := in.mod.ExportedFunction("opa_heap_blocks_stash"); stash != nil {
		if _, err := stash.Call(ctx); err != nil {
			return fmt.Errorf("opa_heap_blocks_stash: %w", err)
		}
	}
	res, err := in.mod.ExportedFunction("opa_heap_ptr_get").Call(ctx)
	if err != nil {
		return fmt.Errorf("opa_heap_ptr_get: %w", err)
	}
	in.dataHeapPtr = uint32(res[0])
	return nil
}

func (in *wasmInstance) exportedJSON(ctx context.Context, name string, v any) error {
	fn := in.mod.ExportedFunction(name)
	if fn == nil {
		return fmt.Errorf("the policy's Wasm does not export %s", name)
	}
	res, err := fn.Call(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s, err := in.dump(ctx, uint32(res[0]), in.jsonDump)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return json.Unmarshal(s, v)
}

// store copies a serialized value into the instance's heap and parses it
// there with parse (opa_json_parse or opa_value_parse).
func (in *wasmInstance) store(ctx context.Context, b []byte, parse api.Function) (uint32, error) {
	res, err := in.malloc.Call(ctx, uint64(len(b)))
	if err != nil {
		return 0, err
	}
	if !in.mem.Write(uint32(res[0]), b) {
		return 0, fmt.Errorf("%d bytes do not fit in the policy's memory", len(b))
	}
	res, err = parse.Call(ctx, res[0], uint64(len(b)))
	if err != nil {
		return 0, err
	}
	if res[0] == 0 {
		return 0, fmt.Errorf("the policy's Wasm could not parse %.40q", b)
	}
	return uint32(res[0]), nil
}

// dump serializes the value at addr with dump (opa_json_dump or
// opa_value_dump) and copies the text out.
func (in *wasmInstance) dump(ctx context.Context, addr uint32, dump api.Function) ([]byte, error) {
	res, err := dump.Call(ctx, uint64(addr))
	if err != nil {
		return nil, err
	}
	return in.cString(uint32(res[0]))
}

// cString copies the NUL-terminated string at addr out of the memory.
func (in *wasmInstance) cString(addr uint32) ([]byte, error) {
	buf, ok := in.mem.Read(addr, in.mem.Size()-addr)
	if !ok {
		return nil, fmt.Errorf("string address %#x is outside the policy's memory", addr)
	}
	n := bytes.IndexByte(buf, 0)
	if n < 0 {
		return nil, fmt.Errorf("string at %#x has no end", addr)
	}
	return bytes.Clone(buf[:n]), nil
}

// eval runs one decision with opa_eval: the input is written just above
// the data, and the evaluation's heap starts after it. When ctx ends, the
// deadline check's next tick (hostTick) stops the evaluation.
func (in *wasmInstance) eval(ctx context.Context, input []byte) ([]byte, error) {
	end := uint64(in.dataHeapPtr) + uint64(len(input))
	if end > uint64(in.mem.Size()) {
		pages := (end-uint64(in.mem.Size()))/65536 + 1
		if _, ok := in.mem.Grow(uint32(pages)); !ok {
			return nil, fmt.Errorf("the input document (%d bytes) does not fit in the policy's memory limit of %d MiB",
				len(input), wasmMaxPages/16)
		}
	}
	in.mem.Write(in.dataHeapPtr, input)
	in.failure = nil
	res, err := in.opaEval.Call(context.WithValue(ctx, instanceKey{}, in),
		0, uint64(in.entrypoint), uint64(in.dataAddr), uint64(in.dataHeapPtr), uint64(len(input)), end, 0)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && in.failure != nil:
		return nil, in.failure
	case err != nil:
		return nil, err
	}
	return in.cString(uint32(res[0]))
}

// hostTick is the deadline check's call (wasmbin.AddDeadlineCheck): it
// stops an evaluation whose context has ended.
func hostTick(ctx context.Context, _ api.Module, _ []uint64) {
	if err := ctx.Err(); err != nil {
		panic(err)
	}
}

func instanceOf(ctx context.Context) *wasmInstance {
	in, _ := ctx.Value(instanceKey{}).(*wasmInstance)
	return in
}

// hostAbort is opa_abort: the runtime hit an internal error.
func hostAbort(ctx context.Context, m api.Module, stack []uint64) {
	in := instanceOf(ctx)
	msg := "unknown error"
	if in != nil {
		if b, err := in.cString(uint32(stack[0])); err == nil {
			msg = string(b)
		}
		in.failure = fmt.Errorf("the policy's Wasm aborted: %s", msg)
	}
	panic(fmt.Errorf("opa_abort: %s", msg))
}

// hostBuiltin is opa_builtinN: it runs OPA's Go implementation of a
// built-in the Wasm runtime does not have, or that plexus runs in Go
// (compileWasm). An error stops the evaluation, as the topdown evaluator's
// strict built-in errors do.
func hostBuiltin(ctx context.Context, _ api.Module, stack []uint64) {
	in := instanceOf(ctx)
	if in == nil {
		panic(errors.New("policy built-in called outside a decision"))
	}
	addr, err := in.builtin(ctx, uint32(stack[0]), stack[2:])
	if err != nil {
		in.failure = err
		panic(err)
	}
	stack[0] = uint64(addr)
}

func (in *wasmInstance) builtin(ctx context.Context, id uint32, args []uint64) (uint32, error) {
	name, ok := in.builtins[id]
	if !ok {
		return 0, fmt.Errorf("the policy's Wasm called unknown built-in %d", id)
	}
	operands, err := in.operands(ctx, id, args)
	if err != nil {
		return 0, fmt.Errorf("%s: reading operands: %w", name, err)
	}
	if name == strictBuiltin {
		// The operands are the wrapped built-in's name and its operands.
		s, ok := operands[0].Value.(ast.String)
		arr, ok2 := operands[1].Value.(*ast.Array)
		if !ok || !ok2 {
			return 0, fmt.Errorf("%s: malformed call", strictBuiltin)
		}
		name, operands = string(s), make([]*ast.Term, 0, arr.Len())
		arr.Foreach(func(t *ast.Term) { operands = append(operands, t) })
	}
	fn := topdown.GetBuiltin(name)
	if fn == nil {
		return 0, fmt.Errorf("built-in %s is not available", name)
	}
	var out *ast.Term
	bctx := topdown.BuiltinContext{Context: ctx, Cache: builtins.Cache{}, Capabilities: in.caps}
	if err := fn(bctx, operands, func(t *ast.Term) error { out = t; return nil }); err != nil {
		return 0, err // OPA's built-in errors name the built-in
	}
	if out == nil {
		return 0, nil // undefined
	}
	return in.storeValue(ctx, out.Value, in.hosted[id])
}

// operands reads the call's values. The regex and glob aliases take
// strings and numbers, so JSON does; anything else may take sets, so the
// exact Rego form is read.
func (in *wasmInstance) operands(ctx context.Context, id uint32, args []uint64) ([]*ast.Term, error) {
	out := make([]*ast.Term, 0, len(args))
	for _, a := range args {
		if in.hosted[id] {
			b, err := in.dump(ctx, uint32(a), in.jsonDump)
			if err != nil {
				return nil, err
			}
			var x any
			if err := json.Unmarshal(b, &x); err != nil {
				return nil, err
			}
			v, err := ast.InterfaceToValue(x)
			if err != nil {
				return nil, err
			}
			out = append(out, ast.NewTerm(v))
			continue
		}
		b, err := in.dump(ctx, uint32(a), in.valueDump)
		if err != nil {
			return nil, err
		}
		t, err := ast.ParseTerm(string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (in *wasmInstance) storeValue(ctx context.Context, v ast.Value, plain bool) (uint32, error) {
	if plain || !hasSet(v) {
		if j, err := ast.JSON(v); err == nil {
			if b, err := json.Marshal(j); err == nil {
				return in.store(ctx, b, in.jsonParse)
			}
		}
	}
	return in.store(ctx, []byte(v.String()), in.valueParse)
}

func hasSet(v ast.Value) bool {
	found := false
	ast.WalkTerms(v, func(t *ast.Term) bool {
		if _, ok := t.Value.(ast.Set); ok {
			found = true
		}
		return found
	})
	return found
}
