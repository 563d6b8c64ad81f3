# Generated API code: core/api/v1alpha1's deepcopy, the CRDs in
# deploy/base/plexus-crds.yaml, and core/api/client (apply configurations,
# typed client, listers, informers), from the Go types and their markers.
# The generators are pinned in tools/codegen/go.mod.
CODEGEN_DIR   := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/codegen)
CODEGEN_TOOLS := controller-gen client-gen applyconfiguration-gen lister-gen informer-gen

.PHONY: generate lint-generated codegen-bins

codegen-bins:
	@mkdir -p $(BIN)/codegen
	cd $(CODEGEN_DIR) && GOWORK=off $(GO) build -o $(BIN)/codegen/ \
		sigs.k8s.io/controller-tools/cmd/controller-gen \
		$(addprefix k8s.io/code-generator/cmd/,$(filter-out controller-gen,$(CODEGEN_TOOLS)))

## generate: regenerate the API code and CRDs from core/api/v1alpha1
generate: codegen-bins
	BIN=$(BIN)/codegen ./tools/codegen/generate.sh

## lint-generated: fail when the generated API code or CRDs are stale
lint-generated: generate
	@git diff --exit-code --stat -- core/api deploy/base/plexus-crds.yaml || \
		{ echo "generated files are stale: run make generate and commit the result"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- core/api)" || \
		{ git status --porcelain -- core/api; echo "make generate wrote files git does not track"; exit 1; }
