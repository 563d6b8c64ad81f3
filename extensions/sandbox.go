package extensions

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/plexus-cni/plexus/extensions/wasmbin"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// module is one configured extension: its declaration, read at New, and
// its sandbox, built on first use. One instance serves the calls one at a
// time; a failed call discards it and the next call instantiates afresh.
type module struct {
	path   string
	decl   *Declaration
	config []byte
	lim    limits
	cache  wazero.CompilationCache // nil: compile in memory only
	dir    string                  // cache dir for the compile lock
	// longLived asks for wasmbin's deadline check (Config.LongLived).
	longLived bool

	// dropped counts warnings past the cap of a call (relayWarnings).
	dropped atomic.Uint64
	// refused is why the module never runs (Config.Isolate); set before
	// the host serves calls, read-only after.
	refused error

	mu sync.Mutex
	// ticked: load added wasmbin's deadline check; a module the rewriter
	// refuses gets wazero's check, as in thin mode.
	ticked   bool
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	inst     api.Module
	stderr   *tail
	// sha256 is the hex digest of the bytes read, set by load or state.
	sha256 string
	// wasm holds the bytes Check read; load reads path when it is nil.
	wasm []byte
}

// name is the declared name, or the path of a module whose declaration
// could not be read.
func (m *module) name() string { return cmp.Or(m.decl.Name, m.path) }

// state is the module's ModuleState.
func (m *module) state() ModuleState {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sha256 == "" {
		if wasm, err := readModule(m.path); err == nil {
			m.sha256 = fmt.Sprintf("%x", sha256.Sum256(wasm))
		}
	}
	st := ModuleState{
		Name: m.name(), Version: m.decl.Version, Path: m.path, SHA256: m.sha256,
		Loaded: m.refused == nil && m.compiled != nil,
	}
	if m.refused != nil {
		st.Err = m.refused.Error()
	}
	return st
}

// load builds the module's runtime and compiles it. Each module has its own
// runtime because the memory cap is a runtime setting.
func (m *module) load(ctx context.Context) error {
	if m.compiled != nil {
		return nil
	}
	var err error
	wasm := m.wasm // the bytes Check read, else the file's
	if wasm == nil {
		if wasm, err = readModule(m.path); err != nil {
			return err
		}
	}
	m.sha256 = fmt.Sprintf("%x", sha256.Sum256(wasm))
	// Before wazero sees it: wazero allocates what a vector claims.
	if err := wasmfmt.CheckLimits(wasm); err != nil {
		return fmt.Errorf("checking: %w", err)
	}
	// The table bound becomes part of the bytes compiled, the compilation
	// cache's key; it is the same for every config (MaxTableEntries).
	wasm, err = wasmbin.BoundTables(wasm, MaxTableEntries)
	if err != nil {
		return fmt.Errorf("bounding its tables: %w", err)
	}
	// A long-lived host adds wasmbin's deadline check if the rewriter takes
	// the module. Otherwise wazero's context check stops its calls: slower,
	// but the same deadline and memory cap, so a module cannot escape either
	// by being unrewritable. The two never share a cache entry: a rewritten
	// module imports the tick, which no module may import itself (verify).
	ticked := false
	if m.longLived {
		// A malformed module fails to compile below.
		if checked, err := wasmbin.AddDeadlineCheck(wasm); err == nil {
			wasm, ticked = checked, true
		}
	}
	rc := wazero.NewRuntimeConfig().
		WithCustomSections(true).
		// DWARF only adds source lines to stack traces, which explain
		// drops, and CheckLimits does not vet the debug sections.
		WithDebugInfoEnabled(false).
		WithMemoryLimitPages(m.lim.memoryPages)
	if m.cache != nil {
		rc = rc.WithCompilationCache(m.cache)
	}
	rt, err := wasmbin.NewRuntime(ctx, rc, ticked)
	if err != nil {
		return fmt.Errorf("creating its runtime: %w", err)
	}
	compiled, err := m.compile(ctx, rt, wasm)
	if err == nil {
		err = m.verify(compiled, ticked)
	}
	if err == nil {
		err = instantiateHost(ctx, rt)
	}
	if err != nil {
		_ = rt.Close(ctx)
		return err
	}
	m.rt, m.compiled, m.ticked = rt, compiled, ticked
	return nil
}

// readModule reads a module file of at most MaxModuleBytes.
func readModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	wasm, err := io.ReadAll(io.LimitReader(f, MaxModuleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(wasm) > MaxModuleBytes {
		return nil, fmt.Errorf("module is more than the %d bytes plexus loads", MaxModuleBytes)
	}
	return wasm, nil
}

// compile holds a lock on the cache entry so that concurrent first calls
// in many CNI processes compile the module once, not once each.
func (m *module) compile(ctx context.Context, rt wazero.Runtime, wasm []byte) (wazero.CompiledModule, error) {
	if m.dir != "" {
		unlock, err := lockFile(m.dir, m.path)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	c, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("compiling: %w", err)
	}
	return c, nil
}

// verify re-reads the declaration from the compiled module, since the file
// may have changed since New; ticked allows the tick import load added.
func (m *module) verify(c wazero.CompiledModule, ticked bool) error {
	var found []byte
	for _, s := range c.CustomSections() {
		if s.Name() == abi.ManifestSection {
			found = s.Data()
		}
	}
	got, err := ParseManifest(found)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(*got, m.decl.Manifest) {
		return fmt.Errorf("declaration changed since the module was first read")
	}
	if len(c.ImportedMemories()) > 0 {
		return fmt.Errorf("imports a memory")
	}
	var imps []Import
	for _, f := range c.ImportedFunctions() {
		mod, name, _ := f.Import()
		if ticked && mod == wasmbin.TickModule && name == wasmbin.TickFunc {
			ticked = false
			continue
		}
		imps = append(imps, Import{Module: mod, Name: name, Kind: wasmfmt.KindFunc})
	}
	return checkImports(imps)
}

// instantiateHost provides the ABI's host functions and WASI preview1,
// with no args, environment, filesystem or sockets; instance sets the
// clocks and randomness.
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return err
	}
	i32 := []api.ValueType{api.ValueTypeI32}
	i32x2 := []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}
	_, err := rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(inputRead), i32x2, i32).Export("input_read").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(outputWrite), i32x2, i32).Export("output_write").
		Instantiate(ctx)
	return err
}

// instance returns the live instance, instantiating one if needed. The
// reactor's _initialize runs as a call: under the call deadline, stopped
// the same way a hook is.
func (m *module) instance(ctx context.Context) (api.Module, error) {
	if m.inst != nil {
		return m.inst, nil
	}
	if err := m.load(ctx); err != nil {
		return nil, fmt.Errorf("loading %s: %w", m.path, err)
	}
	m.stderr = &tail{}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStdout(m.stderr).
		WithStderr(m.stderr).
		// Deterministic randomness; wazero's default clocks are already fake:
		// a fixed epoch that advances 1ms per reading.
		WithRandSource(rand.NewChaCha8([32]byte{'p', 'l', 'e', 'x', 'u', 's'}))
	ictx, cancel := context.WithTimeout(ctx, m.lim.timeout)
	defer cancel()
	inst, err := m.rt.InstantiateModule(ictx, m.compiled, mc.WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("instantiating: %w", m.explain(ictx, err))
	}
	m.inst = inst
	if init := inst.ExportedFunction("_initialize"); init != nil {
		if _, err := init.Call(ictx); err != nil {
			err = fmt.Errorf("instantiating: %w", m.explain(ictx, err))
			m.discard(ctx)
			return nil, err
		}
	}
	return inst, nil
}

// call runs one hook with input and returns its output.
func (m *module) call(ctx context.Context, hook string, input []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inst, err := m.instance(ctx)
	if err != nil {
		return nil, err
	}
	fn := inst.ExportedFunction(hook)
	if fn == nil {
		return nil, fmt.Errorf("hook %q is not exported", hook)
	}
	st := &callState{input: input, max: m.lim.maxOutput}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, st), m.lim.timeout)
	defer cancel()
	m.stderr.Reset()
	res, err := fn.Call(cctx, uint64(len(input)))
	if err != nil {
		if st.err == nil {
			st.err = m.explain(cctx, err)
		}
		m.discard(ctx)
		return nil, st.err
	}
	if code := uint32(res[0]); code != 0 {
		m.discard(ctx)
		return nil, fmt.Errorf("hook returned status %d, want 0%s", code, m.stderr.suffix())
	}
	return st.output, nil
}

// explain turns a wazero error into the reason a user can act on.
func (m *module) explain(ctx context.Context, err error) error {
	if m.ticked && ctx.Err() != nil { // the deadline check stopped it
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("deadline of %s exceeded", m.lim.timeout)
		}
		return fmt.Errorf("canceled: %w", context.Cause(ctx))
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("deadline of %s exceeded", m.lim.timeout)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("canceled: %w", context.Cause(ctx))
		}
		return fmt.Errorf("module exited with code %d%s", exit.ExitCode(), m.stderr.suffix())
	}
	msg, _, _ := strings.Cut(err.Error(), "\n") // drop wazero's wasm stack trace
	return fmt.Errorf("trap: %s%s%s", msg, m.memoryNote(), m.stderr.suffix())
}

// memoryNote says when a failure came with the memory at its cap, the
// likely cause of a guest's out-of-memory crash.
func (m *module) memoryNote() string {
	if m.inst == nil || m.inst.Memory() == nil {
		return ""
	}
	pages := m.inst.Memory().Size() / wasmPageSize
	if pages+16 < m.lim.memoryPages { // a guest grows in steps; near is at
		return ""
	}
	return fmt.Sprintf(" (memory at %d of %d pages allowed)", pages, m.lim.memoryPages)
}

// discard closes the instance after a failure: its state is unknown.
func (m *module) discard(ctx context.Context) {
	if m.inst != nil {
		_ = m.inst.Close(ctx)
		m.inst = nil
	}
}

func (m *module) close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.discard(ctx)
	if m.rt == nil {
		return nil
	}
	err := m.rt.Close(ctx)
	m.rt, m.compiled = nil, nil
	return err
}

// callState is one hook call's input and output, reached by the host
// functions through the call's context.
type callState struct {
	input  []byte
	output []byte
	max    int
	err    error
}

type callKey struct{}

func stateOf(ctx context.Context) *callState {
	st, _ := ctx.Value(callKey{}).(*callState)
	if st == nil {
		panic(errors.New("plexus host function called outside a hook"))
	}
	return st
}

// inputRead is plexus.input_read(ptr, len) -> copied: it copies the first
// min(len, input length) bytes of the input to guest memory at ptr.
func inputRead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	n = min(n, uint32(len(st.input)))
	if !mod.Memory().Write(ptr, st.input[:n]) {
		st.err = fmt.Errorf("input_read: range [%d, +%d) is outside guest memory", ptr, n)
		panic(st.err)
	}
	stack[0] = api.EncodeU32(n)
}

// outputWrite is plexus.output_write(ptr, len) -> 0: it appends len bytes
// at ptr to the output. Going over the cap traps the call.
func outputWrite(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	if uint64(len(st.output))+uint64(n) > uint64(st.max) {
		st.err = fmt.Errorf("output of %d bytes exceeds the cap of %d bytes", uint64(len(st.output))+uint64(n), st.max)
		panic(st.err)
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		st.err = fmt.Errorf("output_write: range [%d, +%d) is outside guest memory", ptr, n)
		panic(st.err)
	}
	st.output = append(st.output, b...)
	stack[0] = 0
}

// tail keeps the first bytes a module wrote to stdout/stderr: a Go guest
// prints "panic: ..." first, then goroutine traces no CNI error needs.
type tail struct{ b []byte }

const tailMax = 1024

func (t *tail) Write(p []byte) (int, error) {
	if room := tailMax - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *tail) Reset() { t.b = t.b[:0] }

// suffix is the first two non-empty lines the module wrote, if any.
func (t *tail) suffix() string {
	if t == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(t.b), "\n") {
		if l = strings.TrimSpace(l); l != "" && len(lines) < 2 {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return " (module output: " + strings.Join(lines, " / ") + ")"
}
