# Container images, built without a container engine by tools/image (a
# separate Go module pinning go-containerregistry, so that module's
# dependencies stay out of plexus's own go.mod).
#
#   make image        -> $(BIN)/plexus-image.tar  named $(IMAGE)
#   make pause-image  -> $(BIN)/pause-image.tar   named $(PAUSE_IMAGE)
#   make test-image   -> tools/image's tests (the import test needs root and
#                        PLEXUS_E2E=1; it starts its own containerd)
#
# Both archives load with `ctr -n k8s.io images import <tar>` (containerd
# 1.6+) or `docker load -i <tar>`. Timestamps are SOURCE_DATE_EPOCH (the Unix
# epoch when unset), so the same binaries give the same image digest.

BIN     ?= $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# The plexus image's name: by default the one deploy/'s DaemonSets run
# (images_test.go checks they agree), so that after
# `ctr -n k8s.io images import bin/plexus-image.tar` on a node, kubectl
# apply -k deploy/ runs this build (the tag is not :latest, so the pull
# policy is IfNotPresent). To push elsewhere, set IMAGE and point deploy/
# at it with a kustomize `images:` override.
IMAGE       ?= ghcr.io/plexus-cni/plexus:v0.1.0
PAUSE_IMAGE ?= localhost/plexus/pause:3.10

IMAGE_TOOLS_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))../tools/image)
IMAGE_GO        := cd $(IMAGE_TOOLS_DIR) && GOWORK=off CGO_ENABLED=0 go
IMAGE_SRCS      := $(shell find $(IMAGE_TOOLS_DIR) -name '*.go' -not -name '*_test.go') \
                   $(IMAGE_TOOLS_DIR)/go.mod $(IMAGE_TOOLS_DIR)/go.sum

.PHONY: image pause-image test-image
image: build $(BIN)/ocibuild
	$(BIN)/ocibuild -preset plexus -bin $(BIN) -version $(VERSION) -name $(IMAGE) -out $(BIN)/plexus-image.tar

pause-image: $(BIN)/pause-image.tar

$(BIN)/pause-image.tar: $(BIN)/pause $(BIN)/ocibuild
	$(BIN)/ocibuild -preset pause -bin $(BIN) -name $(PAUSE_IMAGE) -out $@

$(BIN)/ocibuild: $(IMAGE_SRCS)
	@mkdir -p $(BIN)
	$(IMAGE_GO) build -trimpath -o $@ ./cmd/ocibuild

# Static, stripped, no build paths: the pause image's digest depends only on
# the source and the Go version.
$(BIN)/pause: $(IMAGE_SRCS)
	@mkdir -p $(BIN)
	$(IMAGE_GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/pause

test-image: $(BIN)/pause
	cd $(IMAGE_TOOLS_DIR) && GOWORK=off PLEXUS_BIN=$(BIN) go test -p 1 -count=1 ./...
