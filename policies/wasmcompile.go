package policies

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/plexus-cni/plexus/internal/wasmbin"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// The wasm evaluator compiles the policy with OPA's Wasm compiler after
// two rewrites, so that it decides exactly as the topdown evaluator does:
//
//   - Strict built-in errors. OPA's Wasm runtime makes a built-in that
//     fails (split on a number, an invalid CIDR) undefined, where the
//     engine's topdown evaluator stops with an error, and an undefined
//     expression in a deny rule would let a request through. Every call of
//     a built-in that can fail goes through a generated function that
//     falls back, when the native call is undefined, to the host, which
//     runs OPA's Go implementation and aborts the evaluation on its error.
//     The common path stays native.
//   - Hosted built-ins. The regex and glob families run in Go: the Wasm
//     runtime forgets compiled patterns after every evaluation (the label
//     selector's pattern alone took ~400 µs a decision), and Go's regexp
//     is the one topdown uses.
const (
	strictPackage = "plexus_wasm_strict" // data.plexus_wasm_strict holds the wrappers
	hostPrefix    = "plexus_host."       // aliases of hosted built-ins
	strictBuiltin = "plexus_host.strict" // the wrappers' fallback
)

var hostedFamilies = []string{"regex.", "glob."}

// totalBuiltins cannot fail, whatever their operands, so they need no
// wrapper. Assignment, unification and print are not evaluated as calls.
var totalBuiltins = map[string]bool{
	"eq": true, "assign": true, "internal.print": true, "print": true,
	"equal": true, "neq": true, "lt": true, "lte": true, "gt": true, "gte": true,
	"internal.member_2": true, "internal.member_3": true,
	"is_number": true, "is_string": true, "is_boolean": true, "is_array": true,
	"is_set": true, "is_object": true, "is_null": true, "type_name": true,
}

// wasmProgram is a policy compiled to Wasm.
type wasmProgram struct {
	binary     []byte
	entrypoint string
	hosted     map[string]string // alias → OPA built-in name
}

// wasmEntrypoint is the entrypoint of a query that is a plain data
// reference, such as data.plexus.authz.decision; the Wasm compiler accepts
// nothing else.
func wasmEntrypoint(query ast.Body) (string, error) {
	if len(query) == 1 {
		if t, ok := query[0].Terms.(*ast.Term); ok {
			if ref, ok := t.Value.(ast.Ref); ok && ref.HasPrefix(ast.DefaultRootRef) && len(ref) > 1 {
				parts := make([]string, 0, len(ref)-1)
				for _, p := range ref[1:] {
					s, ok := p.Value.(ast.String)
					if !ok {
						break
					}
					parts = append(parts, string(s))
				}
				if len(parts) == len(ref)-1 {
					return strings.Join(parts, "/"), nil
				}
			}
		}
	}
	return "", fmt.Errorf("the query %s is not a plain data reference such as %s", query, DefaultQuery)
}

// compileWasm compiles modules for the query's entrypoint.
func compileWasm(ctx context.Context, modules map[string]*ast.Module, query ast.Body) (*wasmProgram, error) {
	ep, err := wasmEntrypoint(query)
	if err != nil {
		return nil, err
	}
	rw := newWasmRewriter()
	b := &bundle.Bundle{Data: map[string]any{}}
	names := make([]string, 0, len(modules))
	for name := range modules {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m, err := rw.module(modules[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: name, Path: name, Parsed: m})
	}
	strict, err := rw.strictModule()
	if err != nil {
		return nil, err
	}
	b.Modules = append(b.Modules, bundle.ModuleFile{URL: strictPackage + ".rego", Path: strictPackage + ".rego", Parsed: strict})
	c := compile.New().WithTarget(compile.TargetWasm).WithEntrypoints(ep).
		WithBundle(b).WithCapabilities(rw.capabilities()).WithRegoVersion(ast.RegoV1).
		WithOutput(io.Discard)
	if err := c.Build(ctx); err != nil {
		return nil, fmt.Errorf("compiling to Wasm: %w", err)
	}
	wms := c.Bundle().WasmModules
	if len(wms) != 1 {
		return nil, fmt.Errorf("compiling to Wasm: %d modules built, want 1", len(wms))
	}
	// OPA's compiler wrote it, from the admin's policy: trusted, but the
	// structural check costs some 50 µs and keeps one rule for every
	// module wazero compiles here (wasmfmt.CheckLimits).
	if err := wasmfmt.CheckLimits(wms[0].Raw); err != nil {
		return nil, fmt.Errorf("checking the policy's Wasm: %w", err)
	}
	bin, err := wasmbin.AddDeadlineCheck(wms[0].Raw)
	if err != nil {
		return nil, fmt.Errorf("adding the deadline check to the policy's Wasm: %w", err)
	}
	return &wasmProgram{binary: bin, entrypoint: ep, hosted: rw.aliases}, nil
}

// wasmRewriter rewrites built-in calls and remembers what it needs to
// generate for them.
type wasmRewriter struct {
	builtins map[string]*ast.Builtin // the engine's capabilities
	strict   map[string]int          // wrapped built-in → arity
	aliases  map[string]string       // alias → hosted built-in
}

func newWasmRewriter() *wasmRewriter {
	rw := &wasmRewriter{builtins: map[string]*ast.Builtin{}, strict: map[string]int{}, aliases: map[string]string{}}
	for _, b := range Capabilities().Builtins {
		rw.builtins[b.Name] = b
	}
	return rw
}

// module returns a rewritten copy of m.
func (rw *wasmRewriter) module(m *ast.Module) (*ast.Module, error) {
	m = m.Copy()
	var err error
	ast.WalkExprs(m, func(e *ast.Expr) bool {
		if len(e.With) > 0 && err == nil {
			// "with" replaces documents or functions for one expression; the
			// rewritten calls would escape a replaced built-in.
			err = fmt.Errorf("line %d uses \"with\", which only the topdown evaluator supports here", e.Location.Row)
		}
		if terms, ok := e.Terms.([]*ast.Term); ok && err == nil {
			err = rw.call(terms)
		}
		return false
	})
	ast.WalkTerms(m, func(t *ast.Term) bool {
		if call, ok := t.Value.(ast.Call); ok && err == nil {
			err = rw.call(call)
		}
		return false
	})
	return m, err
}

// call rewrites the operator of one call, in place.
func (rw *wasmRewriter) call(call []*ast.Term) error {
	ref, ok := call[0].Value.(ast.Ref)
	if !ok {
		return nil
	}
	name := ref.String()
	b, ok := rw.builtins[name]
	if !ok || totalBuiltins[name] {
		return nil // a function of the policy, or a built-in that cannot fail
	}
	if b.Relation {
		return fmt.Errorf("%s produces several values, which only the topdown evaluator supports here", name)
	}
	alias := mangle(name)
	for _, family := range hostedFamilies {
		if strings.HasPrefix(name, family) {
			rw.aliases[hostPrefix+alias] = name
			call[0] = ast.RefTerm(ast.VarTerm(strings.TrimSuffix(hostPrefix, ".")), ast.StringTerm(alias))
			return nil
		}
	}
	arity := len(b.Decl.FuncArgs().Args)
	if arity == 0 {
		return nil // nothing an operand could make fail
	}
	rw.strict[name] = arity
	call[0] = ast.RefTerm(ast.DefaultRootDocument, ast.StringTerm(strictPackage), ast.StringTerm(alias))
	return nil
}

// mangle turns a built-in name into one Rego identifier.
func mangle(name string) string { return "f_" + strings.ReplaceAll(name, ".", "__") }

// strictModule generates one wrapper per wrapped built-in: the native call,
// or else the host's strict evaluation of the same call.
func (rw *wasmRewriter) strictModule() (*ast.Module, error) {
	var src bytes.Buffer
	fmt.Fprintf(&src, "package %s\n\n", strictPackage)
	names := make([]string, 0, len(rw.strict))
	for name := range rw.strict {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		args := make([]string, rw.strict[name])
		for i := range args {
			args[i] = fmt.Sprintf("a%d", i)
		}
		a := strings.Join(args, ", ")
		fmt.Fprintf(&src, "%s(%s) := r if {\n\tr := %s(%s)\n} else := %s(%q, [%s])\n\n", mangle(name), a, name, a, strictBuiltin, name, a)
	}
	return ast.ParseModuleWithOpts(strictPackage+".rego", src.String(), ast.ParserOptions{RegoVersion: ast.RegoV1})
}

// capabilities are the engine's plus the aliases and the strict fallback.
func (rw *wasmRewriter) capabilities() *ast.Capabilities {
	caps := Capabilities()
	for alias, name := range rw.aliases {
		b := *rw.builtins[name]
		b.Name = alias
		caps.Builtins = append(caps.Builtins, &b)
	}
	caps.Builtins = append(caps.Builtins, &ast.Builtin{
		Name: strictBuiltin,
		Decl: types.NewFunction(types.Args(types.S, types.NewArray(nil, types.A)), types.A),
	})
	return caps
}
