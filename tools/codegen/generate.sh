#!/bin/sh
# Generates plexus's API code from core/api/v1alpha1's types and markers:
# deepcopy and the CRDs (controller-gen), the apply configurations, typed
# client, listers and informers (k8s.io/code-generator). BIN holds the
# generators, built from this module's pinned tool versions.
set -eu
: "${BIN:?}"
M=github.com/plexus-cni/plexus
API=$M/core/api/v1alpha1
OUT=core/api/client
H=tools/codegen/boilerplate.go.txt
rm -rf "$OUT"
"$BIN/controller-gen" object:headerFile="$H" crd:crdVersions=v1 paths=./core/api/... output:crd:stdout >deploy/base/plexus-crds.yaml.tmp
{ cat tools/codegen/crd-header.yaml; cat deploy/base/plexus-crds.yaml.tmp; } >deploy/base/plexus-crds.yaml
rm deploy/base/plexus-crds.yaml.tmp
"$BIN/applyconfiguration-gen" --go-header-file "$H" --output-dir "$OUT/applyconfiguration" --output-pkg "$M/$OUT/applyconfiguration" "$API"
"$BIN/client-gen" --go-header-file "$H" --clientset-name versioned --input-base "" --input "$API" \
	--output-dir "$OUT/clientset" --output-pkg "$M/$OUT/clientset" --apply-configuration-package "$M/$OUT/applyconfiguration"
"$BIN/lister-gen" --go-header-file "$H" --output-dir "$OUT/listers" --output-pkg "$M/$OUT/listers" "$API"
"$BIN/informer-gen" --go-header-file "$H" --versioned-clientset-package "$M/$OUT/clientset/versioned" \
	--listers-package "$M/$OUT/listers" --output-dir "$OUT/informers" --output-pkg "$M/$OUT/informers" "$API"
