# Container runtimes for the real-node tests besides Debian's containerd 1.6
# (mk/node.mk): containerd 2.x, built from its Go module pinned in
# tools/containerd2 (the daemon and its runc shim; runc stays Debian's).
# Debian's 1.6 shim cannot start 2.x's tasks: it does not know the type
# URL of the runc options 2.x sends ("type with url ...: not found").
# CRI-O, built from its Go module pinned in tools/crio, with its pinns (C,
# from the same module) and copyimg (loads image archives into its
# containers/storage); conmon and runc are Debian's.
#
#   make runtimes      -> $(BIN)/containerd2, $(BIN)/containerd2-shim-runc-v2,
#                         $(BIN)/crio, $(BIN)/pinns, $(BIN)/crio-copyimg
#   make runtime-deps  apt-get install conmon and CRI-O's build needs when missing
#
# The binaries are rebuilt only when missing or when their tools module's
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

CRIO_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/crio)
CRIO_MOD := $(CRIO_DIR)/go.mod $(CRIO_DIR)/go.sum
CRIO_PKG := github.com/cri-o/cri-o
CRIO_BINS := $(BIN)/crio $(BIN)/pinns $(BIN)/crio-copyimg

# CRI-O needs cgo (libseccomp; containers/storage's overlay driver). The
# tags are those its Makefile picks on a host without the optional
# libraries: OpenPGP in Go instead of gpgme, no ostree, no btrfs or
# devicemapper graph drivers; seccomp in. tools/crio's go.sum was seeded
# from CRI-O's own: the checksum database does not serve some of its
# pseudo-versions, and CRI-O's go.sum, verified with its module, vouches
# for them.
CRIO_TAGS := containers_image_ostree_stub containers_image_openpgp \
	exclude_graphdriver_btrfs exclude_graphdriver_devicemapper btrfs_noversion seccomp
CRIO_GO := cd $(CRIO_DIR) && GOWORK=off CGO_ENABLED=1 go

# Debian package:the command or pkg-config module that shows it is there.
# conmon runs CRI-O's containers; the rest build it and pinns (static).
CRIO_DEBS := conmon:conmon libseccomp-dev:libseccomp gcc:cc pkg-config:pkg-config

runtime-deps:
	@set -e; missing=; \
	for pc in $(CRIO_DEBS); do \
		p=$${pc%%:*}; c=$${pc#*:}; \
		case $$p in \
		*-dev) pkg-config --exists $$c 2>/dev/null || missing="$$missing $$p";; \
		*) command -v $$c >/dev/null 2>&1 || missing="$$missing $$p";; \
		esac; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "runtime-deps: installing$$missing from Debian"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi

# CRI-O's version is a constant in its source: nothing to stamp.
$(BIN)/crio: $(CRIO_MOD) | runtime-deps
	@mkdir -p $(BIN)
	$(CRIO_GO) build -trimpath -tags "$(CRIO_TAGS)" -o $@.tmp -ldflags "-s -w" $(CRIO_PKG)/cmd/crio
	mv $@.tmp $@

$(BIN)/crio-copyimg: $(CRIO_MOD) | runtime-deps
	@mkdir -p $(BIN)
	$(CRIO_GO) build -trimpath -tags "$(CRIO_TAGS)" -o $@.tmp -ldflags "-s -w" $(CRIO_PKG)/test/copyimg
	mv $@.tmp $@

# pinns pins a sandbox's namespaces: C, built as CRI-O's pinns/Makefile
# does, from the module's source.
$(BIN)/pinns: $(CRIO_MOD) | runtime-deps
	@mkdir -p $(BIN)
	set -e; src=$$($(CRIO_GO) list -m -f '{{.Dir}}' $(CRIO_PKG))/pinns/src; \
	cc -std=c99 -Os -Wall -Werror -Wextra -static -o $@.tmp $$src/*.c; \
	strip -s $@.tmp; \
	mv $@.tmp $@

# With the oldest supported kubelet (below): $(TEST_RUNTIMES) runs the
# kubelet-facing tests on it too.
.PHONY: runtimes runtimes-clean runtime-deps
runtimes: $(CONTAINERD2_BINS) $(CRIO_BINS) $(BIN)/kubelet-skew

runtimes-clean:
	rm -f $(CONTAINERD2_BINS) $(CRIO_BINS) $(BIN)/kubelet-skew

# The node tests that exercise what a runtime does for plexus (its CNI
# calls and their order, restarts, sandbox status, device and Multus pods,
# plexusd reaching the runtime's socket and network namespaces through the
# host's root, each runtime's distribution component)
# run again on containerd 2.x and on CRI-O; the whole suite, with
# TestRuntimes (each runtime's differences), runs on
# containerd 1.6 in `make test`'s first pass. containerd 2.x also runs
# extension images as image volumes, thick and thin, which containerd 1.6
# cannot mount.
# Then the kubelet-facing set runs with the oldest supported kubelet
# (TEST_SKEW below).
RUNTIME_TESTS := TestThin|TestThick|TestThickGCCollectsLostSandbox|TestDynamic|TestDevicePluginNetworks|TestMultusPods|TestDeployThick|TestDeployDistribution

TEST_RUNTIMES = PLEXUS_RUNTIME=containerd2 PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 \
	go test -count=1 -run '^($(RUNTIME_TESTS)|TestDeployExtensions|TestDeployExtensionsThin)$$' ./tests/node/ && \
	PLEXUS_RUNTIME=crio PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 \
	go test -count=1 -run '^($(RUNTIME_TESTS))$$' ./tests/node/ && \
	$(TEST_SKEW)

.PHONY: test-runtimes
## test-runtimes: the runtime-facing node tests on containerd 2.x and CRI-O, and with the oldest kubelet (needs root)
test-runtimes: build k8s-bins node-bins node-deps runtimes pause-image image
	$(TEST_RUNTIMES)

# kubelet version skew: the node tests with the oldest kubelet plexus
# supports, built from tools/k8s-skew, against the control plane of
# tools/k8s (three minor releases newer, the most Kubernetes allows a
# kubelet to lag). tests/node runs PLEXUS_KUBELET instead of $(BIN)/kubelet.
#
#   make skew-bins   -> $(BIN)/kubelet-skew
#   make test-skew   the node tests on it (needs root)
SKEW_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/k8s-skew)
SKEW_MOD := $(SKEW_DIR)/go.mod $(SKEW_DIR)/go.sum
SKEW_GO := cd $(SKEW_DIR) && GOWORK=off CGO_ENABLED=0 go

.PHONY: skew-bins test-skew
skew-bins: $(BIN)/kubelet-skew

# Stamped with go.mod's version as mk/k8s.mk stamps tools/k8s's, so the
# node reports the kubeletVersion of the release built.
$(BIN)/kubelet-skew: $(SKEW_MOD)
	@mkdir -p $(BIN)
	set -e; \
	v=$$($(SKEW_GO) list -m -f '{{.Version}}' k8s.io/kubernetes); \
	major=$$(echo $$v | sed -E 's/^v([0-9]+)\..*/\1/'); \
	minor=$$(echo $$v | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/'); \
	$(SKEW_GO) build -trimpath -o $@.tmp \
		-ldflags "-s -w \
			-X k8s.io/component-base/version.gitVersion=$$v \
			-X k8s.io/component-base/version.gitMajor=$$major \
			-X k8s.io/component-base/version.gitMinor=$$minor \
			-X k8s.io/component-base/version.gitTreeState=clean" \
		k8s.io/kubernetes/cmd/kubelet; \
	mv $@.tmp $@

# TestKubeletSkew checks that the node runs the old kubelet; the rest are
# the node tests whose behaviour depends on kubelet: pods with selections
# in both modes, static pods, restarts, device networks (the pod-resources
# API: kubelets before 1.34 do not serve Get by default) and deploy/'s
# DaemonSets (projected tokens, host paths, the pod-resources mount).
# Dynamic attachments and stale-record collection go through the runtime,
# not kubelet.
SKEW_TESTS := ^(TestKubeletSkew|TestThin|TestThick|TestDevicePluginNetworks|TestDeployThick)$$

TEST_SKEW = PLEXUS_KUBELET=$(BIN)/kubelet-skew PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 \
	go test -count=1 -run '$(SKEW_TESTS)' ./tests/node/

## test-skew: the kubelet-facing node tests with the oldest supported kubelet (needs root)
test-skew: build k8s-bins node-bins node-deps skew-bins pause-image image
	$(TEST_SKEW)
