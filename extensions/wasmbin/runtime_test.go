package wasmbin

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// loopIterations is what countedLoop runs: many ticks' worth.
const loopIterations = 32 * TickInterval

// countedLoop's f counts a local up to loopIterations and returns.
var countedLoop = module(append(append([]byte{
	0x01, 0x01, 0x7F, // one i32 local
	0x03, 0x40, // loop
	0x20, 0x00, 0x41, 0x01, 0x6A, 0x22, 0x00, // local.tee 0 (local.get 0 + 1)
	0x41, // i32.const
}, wasmfmt.AppendS32(nil, loopIterations)...),
	0x49, 0x0D, 0x00, // br_if 0 (i32.lt_u)
	0x0B, 0x0B, // end end
)...)

func newRuntime(tb testing.TB, checked bool) wazero.Runtime {
	tb.Helper()
	ctx := context.Background()
	rt, err := NewRuntime(ctx, wazero.NewRuntimeConfig(), checked)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rt.Close(ctx) })
	return rt
}

func exported(tb testing.TB, rt wazero.Runtime, bin []byte) api.Function {
	tb.Helper()
	mod, err := rt.Instantiate(context.Background(), bin)
	if err != nil {
		tb.Fatal(err)
	}
	return mod.ExportedFunction("f")
}

// TestWazeroIssue2466 pins what the rewriter works around.
// https://github.com/wazero/wazero/issues/2466: wazero's own check
// (RuntimeConfig.WithCloseOnContextDone) calls out of the compiled code at
// every loop iteration. It still stops code at its deadline, and thin
// mode relies on it; a checked runtime (plexusd's, extensions'
// Config.LongLived) turns it off and stops calls with AddDeadlineCheck's
// tick alone. When the issue is resolved, BenchmarkWazeroIssue2466's two
// cases cost alike, and checked runtimes can use wazero's check instead.
func TestWazeroIssue2466(t *testing.T) {
	t.Run("wazero's check stops code at its deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := exported(t, newRuntime(t, false), endlessLoop).Call(ctx)
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
			t.Fatalf("the endless loop returned %v, want wazero's deadline exit", err)
		}
	})
	t.Run("a checked runtime stops code with the tick alone", func(t *testing.T) {
		rt := newRuntime(t, true)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := exported(t, rt, countedLoop).Call(ctx); err != nil {
			t.Fatalf("without the rewriter's check the loop returned %v; want it to run to its end, wazero's check off", err)
		}
		checked, err := AddDeadlineCheck(countedLoop)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := exported(t, rt, checked).Call(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("with the rewriter's check the loop returned %v, want the context's end", err)
		}
	})
}

// BenchmarkWazeroIssue2466 is the cost of a loop under each check: the
// wazero case is what issue 2466 asks to make cheap.
func BenchmarkWazeroIssue2466(b *testing.B) {
	checked, err := AddDeadlineCheck(countedLoop)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		checked bool
		bin     []byte
	}{{"wazero", false, countedLoop}, {"rewriter", true, checked}} {
		b.Run(c.name, func(b *testing.B) {
			f := exported(b, newRuntime(b, c.checked), c.bin)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // every call has a deadline
			defer cancel()
			for b.Loop() {
				if _, err := f.Call(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOnlyWasmbinCreatesRuntimes: no other product code (non-test Go
// files of the repository) calls wazero.NewRuntime*, so every runtime
// gets exactly one of the two deadline checks (NewRuntime).
func TestOnlyWasmbinCreatesRuntimes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (path == here || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		for _, at := range runtimeConstructors(t, path) {
			t.Errorf("%s calls wazero.%s: create runtimes with wasmbin.NewRuntime", strings.TrimPrefix(at.pos, root+"/"), at.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type call struct{ pos, name string }

// runtimeConstructors lists the file's uses of wazero's two runtime
// constructors, under whatever name the file imports wazero.
func runtimeConstructors(t *testing.T, path string) []call {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/tetratelabs/wazero" {
			local = "wazero"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" {
		return nil
	}
	if local == "." {
		return []call{{fset.Position(f.Package).String(), "* (dot import)"}}
	}
	var found []call
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "NewRuntime" && sel.Sel.Name != "NewRuntimeWithConfig") {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
			found = append(found, call{fset.Position(sel.Pos()).String(), sel.Sel.Name})
		}
		return true
	})
	return found
}
