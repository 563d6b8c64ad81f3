# A real node for the tests in tests/node (included by the main Makefile):
# containerd, runc and iptables from Debian's packages; kubelet,
# kube-controller-manager and kube-scheduler built from the pinned
# k8s.io/kubernetes module in tools/k8s, as kube-apiserver is (mk/k8s.mk);
# crictl from sigs.k8s.io/cri-tools, pinned in tools/crictl.
#
#   make node-deps   apt-get install containerd, runc and iptables when missing
#   make node-bins   -> $(BIN)/kubelet, kube-controller-manager, kube-scheduler, crictl
#
# The binaries are rebuilt only when missing or when their module's go.mod or
# go.sum changes.

BIN ?= $(CURDIR)/bin

NODE_MK_DIR    := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
CRICTL_DIR     := $(NODE_MK_DIR)/../tools/crictl
CRICTL_MOD     := $(CRICTL_DIR)/go.mod $(CRICTL_DIR)/go.sum
NODE_K8S_BINS  := $(BIN)/kubelet $(BIN)/kube-controller-manager $(BIN)/kube-scheduler

# Static binaries, and no go.work from a parent directory that could change
# the build list (as K8S_GO in mk/k8s.mk).
NODE_GO = GOWORK=off CGO_ENABLED=0 go

# Debian package:the commands the tests use from it. ctr is containerd's;
# the tests import the pause image with it.
NODE_DEB_CMDS := containerd:containerd,ctr runc:runc iptables:iptables

.PHONY: node-bins node-deps node-clean
node-bins: $(NODE_K8S_BINS) $(BIN)/crictl

# Installs only what is missing, so a machine that has them (or has newer
# ones from elsewhere) is left alone. PATH gets the sbin directories, where
# Debian puts runc and iptables, for users whose PATH lacks them.
node-deps:
	@set -e; export PATH="$$PATH:/usr/local/sbin:/usr/sbin:/sbin"; missing=; \
	for pc in $(NODE_DEB_CMDS); do \
		for c in $$(echo $${pc#*:} | tr , ' '); do \
			if ! command -v $$c >/dev/null 2>&1; then missing="$$missing $${pc%%:*}"; break; fi; \
		done; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "node-deps: installing$$missing from Debian"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi

# kubelet and the controllers: the pattern rule in mk/k8s.mk.

$(BIN)/crictl: $(CRICTL_MOD)
	@mkdir -p $(BIN)
	set -e; cd $(CRICTL_DIR); \
	v=$$($(NODE_GO) list -m -f '{{.Version}}' sigs.k8s.io/cri-tools); \
	$(NODE_GO) build -trimpath -o $@.tmp \
		-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$$v" \
		sigs.k8s.io/cri-tools/cmd/crictl; \
	mv $@.tmp $@

node-clean:
	rm -f $(NODE_K8S_BINS) $(BIN)/crictl
