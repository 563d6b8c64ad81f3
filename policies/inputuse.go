package policies

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

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

func inputUseOf(modules map[string]*ast.Module, query string) inputUse {
	body, err := ast.ParseBodyWithOpts(query, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return inputUse{true, true, true} // the query will not compile anyway
	}
	refs := inputRefs(nil, body)
	for _, m := range modules {
		refs = append(refs, inputRefs(m.Imports, m)...)
	}
	return inputUse{
		namespaceLabels: anyMayReach(refs, "namespace", "labels"),
		nadConfig:       anyMayReach(refs, "nad", "config"),
		selections:      anyMayReach(refs, "selections"),
	}
}

// inputRefs lists the references to input in x, with references through
// an import of input resolved, and a bare input (or an imported alias of
// it) as a reference to the whole of it.
func inputRefs(imports []*ast.Import, x any) []ast.Ref {
	aliases := map[ast.Var]ast.Ref{ast.InputRootDocument.Value.(ast.Var): {ast.InputRootDocument}}
	for _, imp := range imports {
		path, ok := imp.Path.Value.(ast.Ref)
		if !ok || !path[0].Equal(ast.InputRootDocument) {
			continue
		}
		alias := imp.Alias
		if alias == "" {
			if len(path) == 1 {
				continue // "import input" names input itself
			}
			last, ok := path[len(path)-1].Value.(ast.String)
			if !ok {
				continue
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
				ast.WalkTerms(term, visit)
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

func anyMayReach(refs []ast.Ref, path ...string) bool {
	for _, r := range refs {
		if refMayReach(r[1:], path...) {
			return true
		}
	}
	return false
}

// refMayReach reports whether the ref suffix could denote path or a value
// containing it: it stops short of path, or matches it with variables.
func refMayReach(suffix ast.Ref, path ...string) bool {
	for i, p := range path {
		if i >= len(suffix) {
			return true
		}
		s, ok := suffix[i].Value.(ast.String)
		if ok && string(s) != p {
			return false
		}
	}
	return true
}
