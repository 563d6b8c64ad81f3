package policies

import "github.com/open-policy-agent/opa/v1/ast"

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
