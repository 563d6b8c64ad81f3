# Container runtimes for the real-node tests besides Debian's containerd 1.6
# (mk/node.mk): containerd 2.x, built from its Go module pinned in
# tools/containerd2 (the daemon and its runc shim; runc stays Debian's).
# Debian's 1.6 shim cannot start 2.x's tasks: it does not know the type
# URL of the runc options 2.x sends ("type with url ...: not found").
#
#   make runtimes   -> $(BIN)/containerd2, $(BIN)/containerd2-shim-runc-v2
#
# The binaries are rebuilt only when missing or when tools/containerd2's
# go.mod or go.sum changes.

BIN ?= $(CURDIR)/bin

CONTAINERD2_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/containerd2)
CONTAINERD2_MOD := $(CONTAINERD2_DIR)/go.mod $(CONTAINERD2_DIR)/go.sum
CONTAINERD2_PKG := github.com/containerd/containerd/v2
CONTAINERD2_BINS := $(BIN)/containerd2 $(BIN)/containerd2-shim-runc-v2

# Without cgo, as the static release is built: the tags leave out the
# snapshotters that need cgo or disks this node does not use (btrfs,
# devmapper, zfs) and the CLI's man page generator. The CRI plugin is in
# (no no_cri). The shim gets no_grpc as containerd's Makefile builds it:
# it serves ttrpc only.
CONTAINERD2_TAGS := no_btrfs no_devmapper no_zfs urfave_cli_no_docs
CONTAINERD2_GO := cd $(CONTAINERD2_DIR) && GOWORK=off CGO_ENABLED=0 go

.PHONY: runtimes runtimes-clean
runtimes: $(CONTAINERD2_BINS)

# The version stamped in is go.mod's, so `containerd2 --version` and the
# CRI's Version answer name the release actually built.
$(BIN)/containerd2: $(CONTAINERD2_MOD)
	@mkdir -p $(BIN)
	set -e; v=$$($(CONTAINERD2_GO) list -m -f '{{.Version}}' $(CONTAINERD2_PKG)); \
	$(CONTAINERD2_GO) build -trimpath -tags "$(CONTAINERD2_TAGS)" -o $@.tmp \
		-ldflags "-s -w -X $(CONTAINERD2_PKG)/version.Version=$$v" $(CONTAINERD2_PKG)/cmd/containerd; \
	mv $@.tmp $@

$(BIN)/containerd2-shim-runc-v2: $(CONTAINERD2_MOD)
	@mkdir -p $(BIN)
	set -e; v=$$($(CONTAINERD2_GO) list -m -f '{{.Version}}' $(CONTAINERD2_PKG)); \
	$(CONTAINERD2_GO) build -trimpath -tags "$(CONTAINERD2_TAGS) no_grpc" -o $@.tmp \
		-ldflags "-s -w -X $(CONTAINERD2_PKG)/version.Version=$$v" $(CONTAINERD2_PKG)/cmd/containerd-shim-runc-v2; \
	mv $@.tmp $@

runtimes-clean:
	rm -f $(CONTAINERD2_BINS)

# The node tests that exercise what a runtime does for plexus (its CNI
# calls and their order, restarts, sandbox status, device and Multus pods,
# deploy/thick's mounts of the runtime's socket and netns directory, and
# extension images as image volumes, which containerd 1.6 cannot mount)
# run again on containerd 2.x; the whole suite runs on containerd 1.6 in
# `make test`'s first pass, with TestContainerd2 (the differences).
RUNTIME_TESTS := ^(TestThin|TestThick|TestThickGCCollectsLostSandbox|TestDynamic|TestDevicePluginNetworks|TestMultusPods|TestDeployThick|TestDeployExtensions)$$

TEST_RUNTIMES = PLEXUS_RUNTIME=containerd2 PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 \
	go test -count=1 -run '$(RUNTIME_TESTS)' ./tests/node/

.PHONY: test-runtimes
## test-runtimes: the runtime-facing node tests on containerd 2.x (needs root)
test-runtimes: build k8s-bins node-bins node-deps runtimes pause-image image
	$(TEST_RUNTIMES)
