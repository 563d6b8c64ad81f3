// Package docs checks plexus's Markdown files against the repository: the
// Go identifiers they name in backticks exist in its Go code, their
// relative links lead to files and headings that exist, and every
// `make TARGET` they name is a target of the Makefile.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's directory.
const root = "../.."

// docFiles are the Markdown files checked, relative to root, as
// filepath.Glob patterns; each must match a file. "*.md" holds README.md,
// CONTRIBUTING.md and RATIONALE.md.
var docFiles = []string{
	"*.md",
	"docs/*.md",
	"policies/*.md",
	"policies/library/*.md",
	"sdk/*.md",
}

// allowed are names the docs may use that the repository's Go code
// neither declares nor uses: other projects' names, each with where it
// comes from.
var allowed = map[string]string{
	"PodResourcesLister": "kubelet's pod-resources gRPC service",
	"HostToContainer":    "a Kubernetes mountPropagation value",
}

// skipped are directories whose Go code is not the repository's.
var skipped = map[string]bool{".git": true, "bin": true, "vendor": true, "node_modules": true}

// names is what the repository's Go code declares and uses.
type names struct {
	// any: every declared name (package-level, methods, struct fields,
	// interface methods), every selected name (x.Name), and every string
	// literal shaped like an identifier (event and condition reasons).
	any map[string]bool
	// pairs: "pkg.Name" for a package's declarations, "Type.Name" for a
	// type's methods and fields, and "x.Name" for every selector x.Name
	// in the code (an imported package's name, a field's or a variable's).
	pairs map[string]bool
	// lefts: the left-hand names of pairs.
	lefts map[string]bool
	// tests: the Test, Benchmark and Fuzz functions of *_test.go files.
	tests map[string]bool
}

func collect(t *testing.T) *names {
	t.Helper()
	n := &names{any: map[string]bool{}, pairs: map[string]bool{}, lefts: map[string]bool{}, tests: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// This package's names and literals are not the code's.
			if skipped[d.Name()] || path == filepath.Join(root, "tests", "docs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // a fixture that is not Go; the build checks the rest
		}
		n.add(f, strings.HasSuffix(path, "_test.go"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *names) add(f *ast.File, isTest bool) {
	pkg := f.Name.Name
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			n.any[d.Name.Name] = true
			if d.Recv == nil {
				n.pair(pkg, d.Name.Name)
				if isTest {
					n.tests[d.Name.Name] = true
				}
			} else if len(d.Recv.List) == 1 {
				n.pair(recvType(d.Recv.List[0].Type), d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					n.any[s.Name.Name] = true
					n.pair(pkg, s.Name.Name)
					n.members(s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, id := range s.Names {
						n.any[id.Name] = true
						n.pair(pkg, id.Name)
					}
				}
			}
		}
	}
	ast.Inspect(f, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.SelectorExpr:
			n.any[x.Sel.Name] = true
			switch y := x.X.(type) {
			case *ast.Ident:
				n.pair(y.Name, x.Sel.Name)
			case *ast.SelectorExpr:
				n.pair(y.Sel.Name, x.Sel.Name)
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING && isIdent(s) {
				n.any[s] = true
			}
		case *ast.StructType, *ast.InterfaceType:
			n.members("", x.(ast.Expr))
		}
		return true
	})
}

func (n *names) pair(left, name string) {
	if left != "" {
		n.pairs[left+"."+name] = true
		n.lefts[left] = true
	}
}

// members records a struct's fields or an interface's methods, as
// Type.Name when the type has a name.
func (n *names) members(typ string, e ast.Expr) {
	var fields *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, id := range f.Names {
			n.any[id.Name] = true
			if typ != "" {
				n.pair(typ, id.Name)
			}
		}
	}
}

// recvType is a method's receiver type name: T for T, *T, T[K] and *T[K].
func recvType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func isIdent(s string) bool { return identRE.MatchString(s) }

func exported(s string) bool { return s != "" && unicode.IsUpper(rune(s[0])) }

// camel reports a bare token that looks like a Go identifier rather than
// a word in capitals (ADD, CNI_ARGS): exported, with a lower-case letter.
func camel(s string) bool {
	return exported(s) && strings.IndexFunc(s, unicode.IsLower) >= 0
}

// ref is one backticked span of a Markdown file.
type ref struct {
	line int
	text string
}

// spans returns the inline code spans of a Markdown file, outside fenced
// code blocks, with the line each begins on.
func spans(md string) []ref {
	var out []ref
	fenced := false
	lines := strings.Split(md, "\n")
	var para []string // lines of the current run outside fences
	start := 0
	flush := func() {
		text := strings.Join(para, "\n")
		for i := 0; ; {
			a := strings.IndexByte(text[i:], '`')
			if a < 0 {
				break
			}
			a += i
			b := strings.IndexByte(text[a+1:], '`')
			if b < 0 {
				break
			}
			b += a + 1
			if b > a+1 {
				out = append(out, ref{line: start + strings.Count(text[:a], "\n") + 1, text: text[a+1 : b]})
			}
			i = b + 1
		}
		para = nil
	}
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			flush()
			fenced = !fenced
			start = i + 1
			continue
		}
		if fenced {
			start = i + 1
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			start = i + 1
			continue
		}
		para = append(para, l)
	}
	flush()
	return out
}

var (
	testFuncRE = regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z0-9_][A-Za-z0-9_]*`)
	dottedRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
)

// problem says why a span names a Go identifier that does not exist, or
// "" when it exists or is not taken for one.
func (n *names) problem(span string) string {
	// TestX/sub, BenchmarkX*: the function, or a prefix of one.
	if m := testFuncRE.FindString(span); m != "" {
		if strings.HasPrefix(span[len(m):], "*") {
			for name := range n.tests {
				if strings.HasPrefix(name, m) {
					return ""
				}
			}
			return "no test function begins " + m
		}
		if !n.tests[m] {
			return "no test function " + m
		}
		return ""
	}
	// A call's arguments and results are not checked: Type.Method(a, b) (c).
	if i := strings.IndexByte(span, '('); i > 0 {
		span = span[:i]
	}
	switch {
	case dottedRE.MatchString(span):
		parts := strings.Split(span, ".")
		if !camel(parts[len(parts)-1]) {
			return "" // a file name, a JSON path, a Rego path
		}
		if camel(parts[0]) && !n.any[parts[0]] {
			return parts[0] + " is neither declared nor used in the repository's Go code"
		}
		for i := 1; i < len(parts); i++ {
			left, name := parts[i-1], parts[i]
			switch {
			case !camel(name):
			case n.lefts[left] && !n.pairs[left+"."+name]:
				// A package, type, field or variable of the code: Name
				// must be its own.
				return left + "." + name + " is neither declared nor used in the repository's Go code"
			case !n.lefts[left] && !n.any[name]:
				// Something else (a JSON key: runtimeConfig.Name): Name
				// must exist somewhere.
				return name + " is neither declared nor used in the repository's Go code"
			}
		}
	case isIdent(span) && camel(span):
		if !n.any[span] {
			return span + " is neither declared nor used in the repository's Go code"
		}
	}
	return ""
}

// Every Go identifier a doc names in backticks exists: a test function
// in a *_test.go file; pkg.Name or Type.Name declared or used in the Go
// code; a bare exported name declared, used, or a string literal there.
func TestNamedIdentifiersExist(t *testing.T) {
	n := collect(t)
	used := map[string]bool{}
	for _, pattern := range docFiles {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: no such file", pattern)
			continue
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, file)
			for _, r := range spans(string(b)) {
				if allowed[r.text] != "" {
					used[r.text] = true
					continue
				}
				if p := n.problem(r.text); p != "" {
					t.Errorf("%s:%d: `%s`: %s", rel, r.line, r.text, p)
				}
			}
		}
	}
	for name := range allowed {
		switch {
		case n.any[name]:
			t.Errorf("allowed[%q]: the Go code knows it; remove it from the allow-list", name)
		case !used[name]:
			t.Errorf("allowed[%q]: no doc names it; remove it from the allow-list", name)
		}
	}
}

// The heuristics on a made-up repository and doc.
func TestProblem(t *testing.T) {
	n := &names{
		any:   map[string]bool{"Pipeline": true, "Add": true, "Records": true, "Load": true, "NetworkAttachFailed": true},
		pairs: map[string]bool{"pipeline.Pipeline": true, "Pipeline.Add": true, "Records.Load": true},
		lefts: map[string]bool{"pipeline": true, "Pipeline": true, "Records": true},
		tests: map[string]bool{"TestAdd": true, "BenchmarkLifecycleThin": true},
	}
	for span, bad := range map[string]bool{
		"pipeline.Pipeline": false, "Pipeline.Add(ctx, req)": false, "Records.Load": false,
		"NetworkAttachFailed": false, "TestAdd/sub": false, "BenchmarkLifecycle*": false,
		"README.md": false, "core/pipeline": false, "CNI_ARGS": false, "input.origin": false,
		"ADD": false, "plexusctl policy check": false,
		"pipeline.Gone": true, "Pipeline.Del": true, "Gone": true, "TestGone": true,
		"BenchmarkGone*": true, "Gone.Load": true, "runtimeConfig.Add": false, "runtimeConfig.Gone": true,
		"plexus.rules.N": false,
	} {
		if got := n.problem(span) != ""; got != bad {
			t.Errorf("problem(%q) = %q, want a problem: %v", span, n.problem(span), bad)
		}
	}
	got := spans("a `X` b\n\n```\n`Y`\n```\nc `Z`\nd `W\nV`")
	want := []ref{{1, "X"}, {6, "Z"}, {7, "W\nV"}}
	if len(got) != len(want) {
		t.Fatalf("spans = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spans[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
