# Real Kubernetes control plane for end-to-end tests: kube-apiserver and etcd,
# built from the pinned modules in tools/k8s (a separate Go module).
#
#   make k8s-bins      -> $(BIN)/kube-apiserver, $(BIN)/etcd
#
# The binaries are rebuilt only when missing or when tools/k8s/go.mod or go.sum
# changes; the Go build cache makes a rebuild after a no-op change cheap.

BIN ?= $(CURDIR)/bin

# Resolved when this file is included, so it works from any including Makefile.
K8S_TOOLS_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/k8s)
K8S_TOOLS_MOD := $(K8S_TOOLS_DIR)/go.mod $(K8S_TOOLS_DIR)/go.sum

# Static binaries, no VCS stamping (the module cache has none), and no
# go.work from a parent directory that could change the build list.
K8S_GO := cd $(K8S_TOOLS_DIR) && GOWORK=off CGO_ENABLED=0 go

.PHONY: k8s-bins k8s-clean
k8s-bins: $(BIN)/kube-apiserver $(BIN)/etcd

# Every Kubernetes binary the tests run, built from k8s.io/kubernetes/cmd/<name>:
# kube-apiserver here, kubelet and the controllers for the node (mk/node.mk).
K8S_CMDS := $(addprefix $(BIN)/,kube-apiserver kubelet kube-controller-manager kube-scheduler)

# The version stamped in is read from go.mod, so clients (and version-gated
# features, version skew checks, the node's kubeletVersion) see the release
# actually built. Without it the binaries report v0.0.0-master.
$(K8S_CMDS): $(BIN)/%: $(K8S_TOOLS_MOD)
	@mkdir -p $(BIN)
	set -e; \
	v=$$($(K8S_GO) list -m -f '{{.Version}}' k8s.io/kubernetes); \
	major=$$(echo $$v | sed -E 's/^v([0-9]+)\..*/\1/'); \
	minor=$$(echo $$v | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/'); \
	$(K8S_GO) build -trimpath -o $@.tmp \
		-ldflags "-s -w \
			-X k8s.io/component-base/version.gitVersion=$$v \
			-X k8s.io/component-base/version.gitMajor=$$major \
			-X k8s.io/component-base/version.gitMinor=$$minor \
			-X k8s.io/component-base/version.gitTreeState=clean" \
		k8s.io/kubernetes/cmd/$*; \
	mv $@.tmp $@

$(BIN)/etcd: $(K8S_TOOLS_MOD)
	@mkdir -p $(BIN)
	$(K8S_GO) build -trimpath -ldflags "-s -w" -o $@.tmp go.etcd.io/etcd/server/v3
	mv $@.tmp $@

k8s-clean:
	rm -f $(BIN)/kube-apiserver $(BIN)/etcd
