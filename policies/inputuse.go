package policies

import (
	"slices"

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

func inputUseOf(modules map[string]*ast.Module, query ast.Body) inputUse {
	refs := rootedRefs(ast.InputRootDocument, nil, query)
	for _, m := range modules {
		refs = append(refs, rootedRefs(ast.InputRootDocument, m.Imports, m)...)
	}
	return inputUse{
		namespaceLabels: anyMayReach(refs, "namespace", "labels"),
		nadConfig:       anyMayReach(refs, "nad", "config"),
		selections:      anyMayReach(refs, "selections"),
	}
}

func anyMayReach(refs []ast.Ref, path ...string) bool {
	return slices.ContainsFunc(refs, func(r ast.Ref) bool { return refMayReach(r[1:], path...) })
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
