# Extension modules (included by the main Makefile).
#
#   make ext-examples   build each example to bin/extensions/<name>.wasm
#   make ext-hostile    build the hostile test modules to bin/extensions/hostile/
#   make ext-test       native tests of the SDK and the examples, then the host
#                       tests against the modules built here
#   make ext-images     pack each example into an OCI archive,
#                       bin/extensions/images/<name>.tar, named
#                       localhost/plexus-extensions/<name>:<version> as
#                       deploy/extensions expects (plexusctl ext pack; the
#                       node tests pack their own)
#
# A module is a wasip1 reactor (-buildmode=c-shared); its manifest.json is
# appended as the "plexus.manifest" custom section afterwards, since Go has
# no directive for custom sections.

EXT_GO       ?= go
EXT_BIN      ?= bin/extensions
EXT_EXAMPLES := overrides vlan enricher
EXT_HOSTILE  := misbehave evilimport
EXT_WASMENV  := GOOS=wasip1 GOARCH=wasm GOWORK=off
EXT_MANIFEST := $(abspath $(EXT_BIN))/.tools/plexus-manifest

.PHONY: ext-examples ext-hostile ext-test ext-images

$(EXT_MANIFEST): $(wildcard sdk/cmd/plexus-manifest/*.go sdk/abi/*.go sdk/wasmfmt/*.go)
	cd sdk && GOWORK=off $(EXT_GO) build -o $(EXT_MANIFEST) ./cmd/plexus-manifest

# ext_build(moduleDir, pkgs, outDir): build each module and append its manifest.
define ext_build
	@mkdir -p $(3)
	set -e; for m in $(2); do \
		(cd $(1) && $(EXT_WASMENV) $(EXT_GO) build -buildmode=c-shared -trimpath -o $(abspath $(3))/$$m.wasm ./$$m); \
		$(EXT_MANIFEST) -manifest $(1)/$$m/manifest.json $(3)/$$m.wasm; \
	done
endef

ext-examples: $(EXT_MANIFEST)
	$(call ext_build,extensions/examples,$(EXT_EXAMPLES),$(EXT_BIN))

ext-hostile: $(EXT_MANIFEST)
	$(call ext_build,extensions/testdata/hostile,$(EXT_HOSTILE),$(EXT_BIN)/hostile)

ext-test: ext-examples ext-hostile
	cd sdk && GOWORK=off $(EXT_GO) test ./...
	cd extensions/examples && GOWORK=off $(EXT_GO) test ./...
	mkdir -p $(EXT_BIN)/all && cp $(EXT_BIN)/*.wasm $(EXT_BIN)/hostile/*.wasm $(EXT_BIN)/all/
	PLEXUS_EXT_WASM_DIR=$(abspath $(EXT_BIN))/all $(EXT_GO) test ./extensions/

# plexusctl ext pack finds the copier beside itself (make build puts
# plexus-ext-copy there).
ext-images: build
	@mkdir -p $(EXT_BIN)/images
	set -e; for m in $(EXT_EXAMPLES); do \
		$(BIN)/plexusctl ext pack --wasm $(EXT_BIN)/$$m.wasm -o $(EXT_BIN)/images/$$m.tar; \
	done
