package policies

import "github.com/open-policy-agent/opa/v1/ast"

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
