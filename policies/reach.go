package policies

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

// loadForQuery loads, for the engine, every data file but only the .rego
// modules whose package the query reaches through data references,
// followed module by module. Rules the admin did not enable (plexus.rules.N
// without data.plexus.config.N.enabled) are never reached. A thin plugin
// loads the policy in every ADD, and compiling rules the decision never
// reads was most of that cost; plexusctl policy check parses every file.
func loadForQuery(paths []string, query ast.Body) (*Loaded, error) {
	if err := checkPaths(paths); err != nil {
		return nil, err
	}
	var files []string
	base := fileFilter(false)
	res, err := loader.NewFileLoader().
		WithRegoVersion(ast.RegoV1).
		Filtered(paths, func(abspath string, info fs.FileInfo, depth int) bool {
			if base(abspath, info, depth) {
				return true
			}
			if !info.IsDir() && strings.HasSuffix(info.Name(), ".rego") {
				files = append(files, abspath)
				return true // parsed below, if reached
			}
			return false
		})
	if err != nil {
		return nil, fmt.Errorf("loading policy data from %s: %w", strings.Join(paths, ", "), err)
	}
	roots := rootedRefs(ast.DefaultRootDocument, nil, query)
	modules, err := parseReached(files, roots, enabledRules(res.Documents))
	if err != nil {
		return nil, err
	}
	if err := checkForbidden(modules); err != nil {
		return nil, err
	}
	return &Loaded{Modules: modules, Data: res.Documents}, nil
}

// parseQuery parses the decision query for the analyses of what it reaches.
func parseQuery(query string) (ast.Body, error) {
	body, err := ast.ParseBodyWithOpts(query, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("policy query %q: %w", query, err)
	}
	return body, nil
}

// enabledRules reads data.plexus.config.N.enabled == true.
func enabledRules(data map[string]any) map[string]bool {
	enabled := map[string]bool{}
	plexus, _ := data["plexus"].(map[string]any)
	cfg, _ := plexus["config"].(map[string]any)
	for name, v := range cfg {
		if m, ok := v.(map[string]any); ok && m["enabled"] == true {
			enabled[name] = true
		}
	}
	return enabled
}

// regoFile is a module file before and after parsing.
type regoFile struct {
	path   string
	src    []byte
	pkg    ast.Ref // from the package clause; nil when it could not be read
	module *ast.Module
}

// parseReached parses, to a fixpoint, the files whose package some known
// reference may reach, and those whose package clause the scan cannot read.
func parseReached(paths []string, roots []ast.Ref, enabled map[string]bool) (map[string]*ast.Module, error) {
	files := make([]*regoFile, 0, len(paths))
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("loading policy: %w", err)
		}
		pkg := scanPackage(src)
		if name, ok := ruleName(pkg); ok && !enabled[name] {
			continue
		}
		files = append(files, &regoFile{path: p, src: src, pkg: pkg})
	}
	pending := roots
	for {
		var next []ast.Ref
		for _, f := range files {
			if f.module != nil || (f.pkg != nil && !reachesAny(pending, f.pkg)) {
				continue
			}
			m, err := ast.ParseModuleWithOpts(f.path, string(f.src), ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				return nil, fmt.Errorf("loading policy: %w", err)
			}
			f.module, f.pkg = m, m.Package.Path
			next = append(next, rootedRefs(ast.DefaultRootDocument, m.Imports, m)...)
		}
		if len(next) == 0 {
			break
		}
		pending = next
	}
	modules := map[string]*ast.Module{}
	for _, f := range files {
		if f.module == nil {
			continue
		}
		if name, ok := ruleName(f.pkg); ok && !enabled[name] {
			continue // the scan could not read its package clause
		}
		modules[f.path] = f.module
	}
	return modules, nil
}

var packageClause = regexp.MustCompile(`^package\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*(?:#.*)?$`)

// scanPackage reads the package clause, the first line neither blank nor
// a comment, without parsing the module; nil if it is not plain and dotted.
func scanPackage(src []byte) ast.Ref {
	for line := range bytes.Lines(src) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		m := packageClause.FindSubmatch(line)
		if m == nil {
			return nil
		}
		ref := ast.Ref{ast.DefaultRootDocument}
		for _, part := range strings.Split(string(m[1]), ".") {
			ref = append(ref, ast.StringTerm(part))
		}
		return ref
	}
	return nil
}

// ruleName is N for the package data.plexus.rules.N.
func ruleName(pkg ast.Ref) (string, bool) {
	if len(pkg) != 4 || !pkg[1].Equal(ast.StringTerm("plexus")) || !pkg[2].Equal(ast.StringTerm("rules")) {
		return "", false
	}
	s, ok := pkg[3].Value.(ast.String)
	return string(s), ok
}

// reachesAny says whether a reference may denote the document at path (a
// package, or a part of the input), one below it or one containing it:
// one is a prefix of the other, where a variable matches any name.
func reachesAny(refs []ast.Ref, path ast.Ref) bool {
	return slices.ContainsFunc(refs, func(r ast.Ref) bool { return reaches(r, path) })
}

func reaches(r, path ast.Ref) bool {
	for i := 1; i < min(len(r), len(path)); i++ {
		if _, ok := r[i].Value.(ast.String); ok && !r[i].Equal(path[i]) {
			return false
		}
	}
	return true
}

// rootedRefs lists the references x makes to one root document (data or
// input) as full paths: references through imports are resolved ("lib.x"
// under "import data.plexus.lib" is data.plexus.lib.x), and a bare root or
// imported alias refers to all of it. The analyses built on it are
// conservative: a variable in a path matches any name.
func rootedRefs(root *ast.Term, imports []*ast.Import, x any) []ast.Ref {
	aliases := map[ast.Var]ast.Ref{root.Value.(ast.Var): {root}}
	for _, imp := range imports {
		path, ok := imp.Path.Value.(ast.Ref)
		if !ok || !path[0].Equal(root) {
			continue
		}
		alias := imp.Alias
		if alias == "" {
			last, ok := path[len(path)-1].Value.(ast.String)
			if len(path) == 1 || !ok {
				continue // "import input" names the root itself
			}
			alias = ast.Var(last)
		}
		aliases[alias] = path
	}
	var refs []ast.Ref
	var visit func(t *ast.Term) bool
	visit = func(t *ast.Term) bool {
		switch v := t.Value.(type) {
		case ast.Var:
			if path := aliases[v]; path != nil {
				refs = append(refs, path)
			}
		case ast.Ref:
			if head, ok := v[0].Value.(ast.Var); ok && aliases[head] != nil {
				refs = append(refs, aliases[head].Concat(v[1:]))
			}
			for _, term := range v[1:] {
				ast.WalkTerms(term, visit) // references inside brackets
			}
			return true
		}
		return false
	}
	switch x := x.(type) {
	case *ast.Module:
		for _, r := range x.Rules {
			ast.WalkTerms(r, visit)
		}
	case ast.Body:
		ast.WalkTerms(x, visit)
	}
	return refs
}

// inputUse says which parts of the input document, costly to provide, the
// policy may read. The analysis is conservative: a dynamic key, the whole
// input or an import of it counts as reading everything below it.
type inputUse struct {
	// namespaceLabels costs the caller an API call in thin mode.
	namespaceLabels bool
	// nadConfig costs a decode of the delegate's config.
	nadConfig bool
	// selections costs an object per selection element of the pod.
	selections bool
}

func inputUseOf(modules map[string]*ast.Module, query ast.Body) inputUse {
	refs := rootedRefs(ast.InputRootDocument, nil, query)
	for _, m := range modules {
		refs = append(refs, rootedRefs(ast.InputRootDocument, m.Imports, m)...)
	}
	return inputUse{
		namespaceLabels: reachesAny(refs, ast.MustParseRef("input.namespace.labels")),
		nadConfig:       reachesAny(refs, ast.MustParseRef("input.nad.config")),
		selections:      reachesAny(refs, ast.MustParseRef("input.selections")),
	}
}
