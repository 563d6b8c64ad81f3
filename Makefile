# Placeholder so mk/k8s.mk can be exercised on its own; the project Makefile
# replaces this and must keep `include mk/k8s.mk`.
BIN ?= $(CURDIR)/bin

include mk/k8s.mk
