#!/bin/sh
# make demo: attach a pod sandbox (a network namespace) to its default
# network and three selected networks through cnitool -> plexus, show the
# result, then detach and clean up. Needs root. Safe to re-run.
set -eu

BIN=${BIN:-$(pwd)/bin}
DEMO=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/plexus-demo}
NETNS=plexus-demo
BRIDGES="pxdemo0 pxblue pxgreen pxpinned"

if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root (network namespaces, bridges)" >&2
	exit 1
fi

cnitool() {
	CNI_PATH=$BIN NETCONFPATH=$WORK/netconf \
	CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web;K8S_POD_UID=6b1c8a54-0d2e-4c41-9a52-demo00000001" \
		"$BIN/cnitool" "$@" plexus "/var/run/netns/$NETNS"
}

cleanup() {
	[ -d "$WORK/netconf" ] && ip netns list | grep -qw "$NETNS" && cnitool del >/dev/null 2>&1 || true
	ip netns del "$NETNS" 2>/dev/null || true
	for br in $BRIDGES; do ip link del "$br" 2>/dev/null || true; done
	rm -rf "$WORK"
}

# A previous run that was interrupted leaves these behind.
cleanup
trap cleanup EXIT INT TERM

mkdir -p "$WORK/netconf" "$WORK/manifests" "$WORK/ipam" "$WORK/cache"
for f in "$DEMO"/manifests/*.yaml; do
	sed "s#@WORK@#$WORK#g" "$f" >"$WORK/manifests/$(basename "$f")"
done
sed "s#@WORK@#$WORK#g" "$DEMO/default.conflist" >"$WORK/default.conflist"
cat >"$WORK/netconf/00-plexus.conf" <<CONF
{
  "cniVersion": "1.0.0",
  "name": "plexus",
  "type": "plexus",
  "clusterNetwork": "$WORK/default.conflist",
  "manifests": "$WORK/manifests",
  "cacheDir": "$WORK/cache",
  "binDir": "$BIN",
  "logFile": "$WORK/plexus.log",
  "capabilities": {"bandwidth": true}
}
CONF

ip netns add "$NETNS"
echo "== ADD: cnitool -> plexus -> bridge, host-local, static, tuning, bandwidth"
cnitool add >"$WORK/result.json"
echo "== runtime result (the default network's, CNI $(sed -n 's/.*"cniVersion": *"\([^"]*\)".*/\1/p' "$WORK/result.json" | head -1))"
cat "$WORK/result.json"
echo
echo "== ip addr inside the pod's network namespace"
ip -n "$NETNS" -brief addr
echo
echo "== k8s.v1.cni.cncf.io/network-status"
cat "$WORK/manifests/status/demo_web.json"
echo
echo "== DEL"
cnitool del
echo "interfaces left in the namespace: $(ip -n "$NETNS" -brief link | grep -cv '^lo ' || true)"
echo "leases left: $(find "$WORK/ipam" -type f ! -name 'last_reserved_ip*' ! -name lock | wc -l)"
