# plexus: `make demo` and `make test` are all a new machine needs (root, Go).
BIN     ?= $(CURDIR)/bin
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# Reference CNI plugins and cnitool, pinned by go.mod's tool directives.
REF_PLUGINS := \
	github.com/containernetworking/plugins/plugins/main/bridge \
	github.com/containernetworking/plugins/plugins/main/macvlan \
	github.com/containernetworking/plugins/plugins/main/vlan \
	github.com/containernetworking/plugins/plugins/main/host-device \
	github.com/containernetworking/plugins/plugins/main/ipvlan \
	github.com/containernetworking/plugins/plugins/main/ptp \
	github.com/containernetworking/plugins/plugins/main/loopback \
	github.com/containernetworking/plugins/plugins/ipam/host-local \
	github.com/containernetworking/plugins/plugins/ipam/static \
	github.com/containernetworking/plugins/plugins/meta/tuning \
	github.com/containernetworking/plugins/plugins/meta/portmap \
	github.com/containernetworking/plugins/plugins/meta/bandwidth \
	github.com/containernetworking/cni/cnitool

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
EXT_BIN := $(BIN)/extensions

.PHONY: all build plugins demo test test-unit test-core test-policies test-extensions test-cmd test-node fuzz bench lint clean
all: build

## build: plexus binaries, the reference plugins, cnitool and the example
## extension modules into $(BIN)
# Plugins are built static (no cgo), as the reference plugins are released:
# a runtime starts a CNI plugin for every call, and a dynamically linked Go
# binary spends about 0.9 ms of each start in the dynamic loader.
# -trimpath keeps the build machine's paths out of the binaries, so the same
# source builds the same bytes in any checkout (the image). -s -w would make
# the binaries smaller but not start faster: the dropped sections are never
# mapped, and a stack trace needs neither. grpcnotrace keeps
# golang.org/x/net/trace (and its html/template) out of gRPC: linked, its
# reflective method lookups make the linker keep every exported method of
# every type (RATIONALE.md, binary sizes).
GO_TAGS := grpcnotrace
build: plugins ext-examples
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -tags "$(GO_TAGS)" -ldflags "-X main.Version=$(VERSION)" -o $(BIN)/ ./cmd/...

plugins:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(REF_PLUGINS)

## demo: attach a pod in a network namespace to several networks (needs root)
demo: build
	BIN=$(BIN) ./deploy/demo/run.sh

# RACE_PKGS start goroutines or are used concurrently by plexusd; extensions
# is left out: wazero compiling the example modules under -race outlasts
# go test's 10-minute limit.
RACE_PKGS := ./core/lock/ ./core/pipeline/ ./cmd/internal/agent/ ./cmd/internal/nodestate/ ./core/source/kube/cached/ ./core/source/manifests/ ./cmd/internal/daemon/ ./cmd/plexusd/internal/plexusd/ ./cmd/internal/install/ ./cmd/internal/cniplugin/ ./extensions/wasmbin/ ./policies/ ./cmd/plexus-shim/internal/shim/ ./cmd/internal/daemon/wire/

## test: every test: unit, netns integration, Kubernetes e2e, the SDK and
## the example extensions (needs root)
# One package at a time (-p 1): the integration suites check the host's
# interfaces for leaks, which another suite running beside them would add.
# The node suite runs for over ten minutes, go test's default bound for a
# package: -timeout 30m.
# go test's JSON goes to $(BIN)/test.json; tools/testreport prints it as
# go test would, then each skipped test with its reason. The recipe exits
# with go test's status.
test: build k8s-bins node-bins node-deps runtimes pause-image image
	{ PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -p 1 -count=1 -timeout 30m -json ./...; echo $$? >$(BIN)/test.rc; } \
		| tee $(BIN)/test.json | $(GO) run ./tools/testreport; exit $$(cat $(BIN)/test.rc)
	$(TEST_RUNTIMES)
	CGO_ENABLED=1 $(GO) test -race -count=1 $(RACE_PKGS)
	cd sdk && GOWORK=off $(GO) test -count=1 ./...
	cd extensions/examples && GOWORK=off $(GO) test -count=1 ./...
	$(MAKE) test-image
	$(MAKE) fuzz

## fuzz: a short run of every fuzz target (part of make test)
# A count, not a duration: with a duration, Go's fuzzing coordinator can
# report "context deadline exceeded" as the time runs out (golang/go#75804).
# 40,000 inputs take 1-5 s per target here.
FUZZTIME ?= 40000x
FUZZ_TARGETS := core/selection:FuzzParse core/selection:FuzzArgKeyFolding core/status:FuzzFromResult core/record:FuzzDecode core/nad:FuzzFromSpecConfig extensions:FuzzGuestOutput extensions/wasmbin:FuzzAddDeadlineCheck extensions/wasmbin:FuzzBoundTables cmd/internal/daemon/wire:FuzzDecodeRequest
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		$(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME); \
	done
	cd sdk && GOWORK=off $(GO) test ./wasmfmt -run '^$$' -fuzz '^FuzzCheckLimits$$' -fuzztime $(FUZZTIME)

## test-unit: tests that need neither root nor a control plane
test-unit:
	$(GO) test -count=1 ./core/... ./cmd/... ./policies/... ./extensions/...

# Per-area targets: each runs one part's tests and builds only what they
# need. RUN narrows them to the tests matching a go test -run pattern:
# make test-node RUN=TestRuntimes.
RUN ?=

## test-core: core's tests (./core/...)
test-core:
	$(GO) test -count=1 -run '$(RUN)' ./core/...

## test-policies: the policy packages' tests (./policies/...)
test-policies:
	$(GO) test -count=1 -run '$(RUN)' ./policies/...

## test-extensions: the extension host's tests (./extensions/...; the
## example modules, a module of their own, are built by the tests)
test-extensions:
	$(GO) test -count=1 -run '$(RUN)' ./extensions/...

## test-cmd: the binaries' tests (./cmd/...), some on a control plane
# PLEXUS_E2E=1 makes a missing kube-apiserver or etcd a failure, as in
# make test, rather than a skip.
test-cmd: k8s-bins
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -count=1 -run '$(RUN)' ./cmd/...

## test-node: the real-node suite (tests/node): kubelet on containerd 1.6,
## and TestRuntimes on containerd 2.x and CRI-O too (needs root, 10+ min)
# As in make test: one package, a 30-minute bound. make test-runtimes
# runs the runtime-facing tests again on each runtime.
test-node: build k8s-bins node-bins node-deps runtimes pause-image image
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -p 1 -count=1 -timeout 30m -run '$(RUN)' ./tests/node/

## bench: benchmarks (numbers go to docs/performance.md)
bench: build k8s-bins node-bins node-deps pause-image multus
	PLEXUS_BIN=$(BIN) $(GO) test -p 1 -run '^$$' -bench . -benchmem ./core/... ./policies/...
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 20x ./extensions/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench Lifecycle -benchtime 15x ./tests/bench/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench RatioReferencePod -benchtime 30x ./tests/bench/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench DelRatio -benchtime 100x ./tests/bench/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench DelAfterPause -benchtime 200x ./tests/bench/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench PluginStart -benchtime 500x ./tests/bench/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench ShimCall -benchtime 500x ./cmd/plexus-shim/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench ThinPolicyCost -benchtime 150x ./tests/bench/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench 'Concurrent|Memory' -benchtime 2x ./tests/bench/
	$(GO) test -run '^$$' -bench 'HandlerLifecycle|HandlerCall|HandlerCrowdedNode' -benchtime 1000x ./cmd/internal/cniplugin/
	PLEXUS_BIN=$(BIN) $(GO) test -run '^$$' -bench DelegateRoot -benchtime 500x -count 5 ./cmd/internal/cniplugin/
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -run '^$$' -bench SandboxStart -benchtime 40x ./tests/node/
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -run '^$$' -bench PodStart -benchtime 9x ./tests/node/
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -run '^$$' -bench DynamicAttach -benchtime 30x ./tests/node/
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -count=1 -v -run 'TestKubernetes/(Thick)?RequestCounts' ./tests/e2e/ | grep 'API requests'
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -run '^$$' -bench Density -benchtime 1x -timeout 40m -v ./tests/node/ | grep -E 'density_test|^Benchmark'
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -run '^$$' -bench ClusterScale -benchtime 1x -timeout 30m -v ./tests/bench/ | grep -E 'scale_test|^Benchmark'
	PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 $(GO) test -run '^$$' -bench FleetPolicyPush -benchtime 1x -timeout 40m -v ./cmd/internal/agent/ | grep -E 'one push|^Benchmark'
	PLEXUS_STATE_LIFECYCLES=10000 $(GO) test -count=1 -timeout 30m -v -run TestStateOnDiskStaysBounded ./cmd/internal/cniplugin/ | grep lifecycles

## lint: gofmt, go vet, staticcheck
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	# core/api/client is generated against client-go's deprecated fields.
	$(GO) run $(STATICCHECK) $$($(GO) list ./... | grep -v /core/api/client/)
	$(MAKE) lint-image
	$(MAKE) lint-generated

clean:
	rm -rf $(BIN)

include mk/k8s.mk
include mk/node.mk
include mk/runtimes.mk
include mk/multus.mk
include mk/ext.mk
include mk/image.mk
include mk/codegen.mk
