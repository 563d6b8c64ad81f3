# Multus, the reference implementation, for the real-node benchmarks that
# run it beside plexus (tests/node: BenchmarkSandboxStart, BenchmarkPodStart,
# BenchmarkDensity): thin multus, and thick multus-shim and multus-daemon,
# built from its Go module pinned in tools/multus, without cgo and with the
# version stamped in as its hack/build-go.sh does.
#
#   make multus   -> $(BIN)/multus/{multus,multus-shim,multus-daemon}
#
# The binaries are rebuilt only when missing or when tools/multus's go.mod
# or go.sum changes.

BIN ?= $(CURDIR)/bin

MULTUS_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/multus)
MULTUS_MOD := $(MULTUS_DIR)/go.mod $(MULTUS_DIR)/go.sum
MULTUS_PKG := gopkg.in/k8snetworkplumbingwg/multus-cni.v4
MULTUS_BINS := $(BIN)/multus/multus $(BIN)/multus/multus-shim $(BIN)/multus/multus-daemon
MULTUS_GO := cd $(MULTUS_DIR) && GOWORK=off CGO_ENABLED=0 go

.PHONY: multus multus-clean
multus: $(MULTUS_BINS)

$(BIN)/multus/%: $(MULTUS_MOD)
	@mkdir -p $(BIN)/multus
	set -e; v=$$($(MULTUS_GO) list -m -f '{{.Version}}' $(MULTUS_PKG)); \
	$(MULTUS_GO) build -trimpath -o $@.tmp \
		-ldflags "-X $(MULTUS_PKG)/pkg/multus.version=$$v -X $(MULTUS_PKG)/pkg/multus.releaseStatus=,released" \
		$(MULTUS_PKG)/cmd/$*; \
	mv $@.tmp $@

multus-clean:
	rm -rf $(BIN)/multus
