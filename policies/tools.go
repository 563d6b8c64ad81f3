package policies

// Tools behind "plexusctl policy": they use the same loader, capabilities
// and strictness as the engine, so what passes here loads on the node.

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/format"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// newCompiler is the strict compiler the tools share with the engine.
func newCompiler(ctx context.Context, store storage.Store, txn storage.Transaction) *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(Capabilities()).
		WithDefaultRegoVersion(ast.RegoV1).
		WithStrict(true).
		WithEnablePrintStatements(true).
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn))
}

// Check loads paths, *_test.rego included, and compiles them strictly.
func Check(ctx context.Context, paths []string) error {
	loaded, err := LoadPaths(paths, true)
	if err != nil {
		return err
	}
	store := inmem.NewFromObject(loaded.Data)
	txn := storage.NewTransactionOrDie(ctx, store)
	defer store.Abort(ctx, txn)
	c := newCompiler(ctx, store, txn)
	if c.Compile(loaded.Modules); c.Failed() {
		return fmt.Errorf("policy does not compile:\n%w", c.Errors)
	}
	return nil
}

// TestOptions control RunTests.
type TestOptions struct {
	Verbose  bool
	Coverage bool
	// Timeout bounds each test case; 5s when zero.
	Timeout time.Duration
	// TestsUnder, when set, runs only the *_test.rego modules in that
	// directory: a node verifying a revision runs the revision's tests,
	// not the library's, whose own data may differ from the revision's.
	TestsUnder string
}

// TestSummary counts test outcomes; Coverage is a percentage, set only
// when asked for.
type TestSummary struct {
	Pass, Fail, Error, Skip int
	Coverage                float64
}

// OK says whether the run found tests and none failed.
func (s TestSummary) OK() bool { return s.Pass > 0 && s.Fail == 0 && s.Error == 0 }

// RunTests runs the test_ rules of paths as OPA's tester does, writing a
// report to out. Coverage is measured over the non-test modules.
func RunTests(ctx context.Context, paths []string, opts TestOptions, out io.Writer) (TestSummary, error) {
	var sum TestSummary
	loaded, err := LoadPaths(paths, true)
	if err != nil {
		return sum, err
	}
	if opts.TestsUnder != "" { // drop the test modules outside it
		abs, err := filepath.Abs(opts.TestsUnder)
		if err != nil {
			return sum, fmt.Errorf("policy tests under %s: %w", opts.TestsUnder, err)
		}
		for name := range loaded.Modules {
			n, err := filepath.Abs(name)
			if strings.HasSuffix(name, "_test.rego") && (err != nil || filepath.Dir(n) != abs) {
				delete(loaded.Modules, name)
			}
		}
	}
	store := inmem.NewFromObject(loaded.Data)
	txn := storage.NewTransactionOrDie(ctx, store)
	defer store.Abort(ctx, txn)
	runner := tester.NewRunner().
		SetCompiler(newCompiler(ctx, store, txn)).
		SetStore(store).
		SetModules(loaded.Modules).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		EnableTracing(opts.Verbose).
		SetTimeout(cmpDuration(opts.Timeout, 5*time.Second))
	var cov *cover.Cover
	if opts.Coverage {
		cov = cover.New()
		runner.SetCoverageQueryTracer(cov)
	}
	ch, err := runner.RunTests(ctx, txn)
	if err != nil {
		return sum, fmt.Errorf("running policy tests from %s: %w", strings.Join(paths, ", "), err)
	}
	results := sortedResults(ch, &sum)
	if err := (tester.PrettyReporter{Output: out, Verbose: opts.Verbose}).Report(results); err != nil {
		return sum, fmt.Errorf("reporting policy tests: %w", err)
	}
	if sum.Pass+sum.Fail+sum.Error == 0 {
		fmt.Fprintf(out, "no test cases found in %s\n", strings.Join(paths, ", "))
	}
	if cov != nil {
		sum.Coverage = reportCoverage(out, cov, loaded.Modules)
	}
	return sum, nil
}

// sortedResults drains the runner (which reports in completion order),
// counts outcomes, and replays the results in a stable order.
func sortedResults(ch chan *tester.Result, sum *TestSummary) chan *tester.Result {
	var all []*tester.Result
	for r := range ch {
		switch {
		case r.Skip:
			sum.Skip++
		case r.Error != nil:
			sum.Error++
		case r.Fail:
			sum.Fail++
		default:
			sum.Pass++
		}
		all = append(all, r)
	}
	slices.SortStableFunc(all, func(a, b *tester.Result) int {
		return cmp.Or(strings.Compare(a.Package, b.Package), cmp.Compare(a.Location.Row, b.Location.Row))
	})
	out := make(chan *tester.Result, len(all))
	for _, r := range all {
		out <- r
	}
	close(out)
	return out
}

// reportCoverage prints per-file coverage of the non-test modules and the
// lines not covered, and returns the overall percentage.
func reportCoverage(out io.Writer, cov *cover.Cover, modules map[string]*ast.Module) float64 {
	rep := cov.Report(modules)
	var covered, total int
	fmt.Fprintln(out, "coverage:")
	for _, n := range slices.Sorted(maps.Keys(rep.Files)) {
		if strings.HasSuffix(n, "_test.rego") {
			continue
		}
		fr := rep.Files[n]
		covered += fr.CoveredLines
		total += fr.CoveredLines + fr.NotCoveredLines
		fmt.Fprintf(out, "  %6.2f%%  %s%s\n", fr.Coverage, n, notCovered(fr.NotCovered))
	}
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(covered) / float64(total)
	}
	fmt.Fprintf(out, "coverage: %.2f%%\n", pct)
	return pct
}

func notCovered(rs []cover.Range) string {
	if len(rs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		if r.Start.Row == r.End.Row {
			parts = append(parts, fmt.Sprint(r.Start.Row))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.Start.Row, r.End.Row))
		}
	}
	return "  (not covered: lines " + strings.Join(parts, ", ") + ")"
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Format formats the .rego files under paths (Rego v1 style), tests
// included, and returns those it changed; with check it only lists those
// not formatted.
func Format(paths []string, check bool) ([]string, error) {
	files, err := walk(paths, true, func(path string, depth int) bool {
		return depth == 0 || strings.HasSuffix(path, ".rego")
	})
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, f := range files {
		differs, err := formatFile(f, check)
		if err != nil {
			return changed, err
		}
		if differs {
			changed = append(changed, f)
		}
	}
	return changed, nil
}

func formatFile(path string, check bool) (bool, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("formatting: %w", err)
	}
	out, err := format.SourceWithOpts(path, src, format.Opts{RegoVersion: ast.RegoV1, Capabilities: Capabilities()})
	if err != nil {
		return false, fmt.Errorf("formatting %s: %w", path, err)
	}
	if same := bytes.Equal(src, out); same || check {
		return !same, nil
	}
	info, err := os.Stat(path)
	if err == nil {
		err = os.WriteFile(path, out, info.Mode().Perm())
	}
	if err != nil {
		return false, fmt.Errorf("formatting: %w", err)
	}
	return true, nil
}
