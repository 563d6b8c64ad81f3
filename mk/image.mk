# Container images, built without a container engine by tools/image (a
# separate Go module pinning go-containerregistry, so that module's
# dependencies stay out of plexus's own go.mod).
#
#   make image        -> $(BIN)/plexus-image.tar  named $(IMAGE)
#   make pause-image  -> $(BIN)/pause-image.tar   named $(PAUSE_IMAGE)
#   make image-push   -> the plexus image pushed to the registry IMAGE names,
#                        with docker login's credentials (not tested here: no
#                        registry is reachable)
#   make test-image   -> tools/image's tests, on the two archives (needs root:
#                        the import test starts a containerd of its own)
#
# Both archives load with `ctr -n k8s.io images import <tar>` (containerd
# 1.6+) or `docker load -i <tar>`. Timestamps are SOURCE_DATE_EPOCH (the Unix
# epoch when unset), so the same binaries give the same image digest.

BIN     ?= $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# The plexus image's name: by default the one deploy/'s DaemonSets run
# (tools/image/images/deploy_test.go checks they agree), so that after
# `ctr -n k8s.io images import bin/plexus-image.tar` on a node, kubectl
# apply -k deploy/ runs this build (the tag is not :latest, so the pull
# policy is IfNotPresent). To push elsewhere, set IMAGE and point deploy/
# at it with a kustomize `images:` override.
IMAGE       ?= ghcr.io/plexus-cni/plexus:v0.1.0
PAUSE_IMAGE ?= localhost/plexus/pause:3.10

IMAGE_TOOLS_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/image)
IMAGE_GO        := cd $(IMAGE_TOOLS_DIR) && GOWORK=off CGO_ENABLED=0 go
IMAGE_SRCS      := $(shell find $(IMAGE_TOOLS_DIR) -name '*.go' -not -name '*_test.go') \
                   $(IMAGE_TOOLS_DIR)/go.mod $(IMAGE_TOOLS_DIR)/go.sum \
                   $(wildcard $(IMAGE_TOOLS_DIR)/../../extensions/pack/ociarchive/*.go)

IMAGE_MK        := $(abspath $(lastword $(MAKEFILE_LIST)))
# The rule library and baseline policy the plexus image holds
# (/opt/plexus/policy).
POLICIES        := $(abspath $(dir $(IMAGE_MK))../policies)

.PHONY: image image-push pause-image test-image lint-image
image: build $(BIN)/ocibuild
	$(BIN)/ocibuild -preset plexus -bin $(BIN) -policies $(POLICIES) -version $(VERSION) -name $(IMAGE) -out $(BIN)/plexus-image.tar

image-push: build $(BIN)/ocibuild
	$(BIN)/ocibuild -preset plexus -bin $(BIN) -policies $(POLICIES) -version $(VERSION) -name $(IMAGE) -push

pause-image: $(BIN)/pause-image.tar

# A file target, so suites that need the pause image can depend on it.
$(BIN)/pause-image.tar: $(BIN)/pause $(BIN)/ocibuild $(IMAGE_MK)
	$(BIN)/ocibuild -preset pause -bin $(BIN) -name $(PAUSE_IMAGE) -out $@

$(BIN)/ocibuild: $(IMAGE_SRCS)
	@mkdir -p $(BIN)
	$(IMAGE_GO) build -trimpath -o $@ ./cmd/ocibuild

# Static, stripped, no build paths: the pause image's digest depends only on
# the source and the Go version.
$(BIN)/pause: $(IMAGE_SRCS)
	@mkdir -p $(BIN)
	$(IMAGE_GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/pause

# The builder's and pause's unit tests, deploy/Dockerfile against the image,
# deploy/ against IMAGE, and both archives imported into a containerd of the
# test's own (root; PLEXUS_E2E=1 as make test gives its suites).
test-image: image pause-image
	cd $(IMAGE_TOOLS_DIR) && GOWORK=off PLEXUS_BIN=$(BIN) PLEXUS_E2E=1 \
		PLEXUS_IMAGE=$(IMAGE) PLEXUS_PAUSE_IMAGE=$(PAUSE_IMAGE) go test -p 1 -count=1 ./...

# make lint covers plexus's module; this covers tools/image's.
lint-image:
	@test -z "$$(cd $(IMAGE_TOOLS_DIR) && gofmt -l .)" || { cd $(IMAGE_TOOLS_DIR) && gofmt -l .; exit 1; }
	$(IMAGE_GO) vet ./...
	$(IMAGE_GO) run $(STATICCHECK) ./...
