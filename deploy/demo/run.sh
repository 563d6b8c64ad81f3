#!/bin/sh
# make demo: attach a pod sandbox (a network namespace) to its default
# network and three selected networks through cnitool -> plexus, under the
# shipped baseline policy and two example extensions; show the result,
# a pod the baseline refuses, and plexusctl explain's account of the demo
# pod; then detach and clean up. Needs root. Safe to re-run.
set -eu

BIN=${BIN:-$(pwd)/bin}
DEMO=$(cd "$(dirname "$0")" && pwd)
POLICIES=$(cd "$DEMO/../../policies" && pwd)
WORK=${WORK:-/tmp/plexus-demo}
NETNS=plexus-demo
BRIDGES="pxdemo0 pxblue pxgreen pxpinned"

if [ "$(id -u)" != 0 ]; then
	echo "make demo needs root (network namespaces, bridges)" >&2
	exit 1
fi

# cnitool POD COMMAND: a CNI call for pod demo/POD, as a runtime makes it.
cnitool() {
	pod=$1
	shift
	CNI_PATH=$BIN NETCONFPATH=$WORK/netconf \
	CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=$pod" \
		"$BIN/cnitool" "$@" plexus "/var/run/netns/$NETNS"
}

cleanup() {
	[ -d "$WORK/netconf" ] && ip netns list | grep -qw "$NETNS" && cnitool web del >/dev/null 2>&1 || true
	ip netns del "$NETNS" 2>/dev/null || true
	for br in $BRIDGES; do ip link del "$br" 2>/dev/null || true; done
	rm -rf "$WORK"
	# Deepest first; a directory another program wrote to meanwhile stays.
	for d in $CNI_DIRS_CREATED; do rmdir "$d" 2>/dev/null || true; done
}

# cnitool keeps libcni's result cache in /var/lib/cni and has no setting
# for another place: the demo removes the directories it created there.
CNI_DIRS_CREATED=""
for d in /var/lib/cni /var/lib/cni/results; do
	[ -e "$d" ] || CNI_DIRS_CREATED="$d $CNI_DIRS_CREATED"
done

# A previous run that was interrupted leaves these behind.
cleanup
trap cleanup EXIT INT TERM

mkdir -p "$WORK/netconf" "$WORK/manifests" "$WORK/ipam" "$WORK/cache"
for f in "$DEMO"/manifests/*.yaml; do
	sed "s#@WORK@#$WORK#g" "$f" >"$WORK/manifests/$(basename "$f")"
done
sed "s#@WORK@#$WORK#g" "$DEMO/default.conflist" >"$WORK/default.conflist"
# The extensions: overrides owns the selection key io.plexus.overrides
# (delegate config keys a pod may set: here the admin allows mtu);
# enricher adds io.plexus.status.* keys to every network-status entry.
EXTENSIONS='{"modules": [{"path": "'$BIN/extensions/overrides.wasm'", "config": {"allow": ["mtu"]}}, {"path": "'$BIN/extensions/enricher.wasm'"}]}'
echo "$EXTENSIONS" >"$WORK/extensions.json"
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
  "capabilities": {"bandwidth": true},
  "policy": {"paths": ["$POLICIES/library", "$POLICIES/baseline.yaml"]},
  "extensions": $EXTENSIONS
}
CONF

ip netns add "$NETNS"
echo "== policy: the shipped baseline ($POLICIES/baseline.yaml): NADs of the pod's own namespace and default only"
echo "== pod demo/intruder asks for infra/green: the ADD is refused, naming the rule"
if cnitool intruder add >"$WORK/refused.json" 2>&1; then
	echo "the baseline let demo/intruder attach to infra/green" >&2
	exit 1
fi
grep -m1 '^Error: ' "$WORK/refused.json" | sed 's/^Error: //' 
echo "interfaces left in the namespace: $(ip -n "$NETNS" -brief link | grep -cv '^lo ' || true)"
echo
echo "== ADD demo/web: cnitool -> plexus -> policy, extensions, then bridge, host-local, static, bandwidth"
cnitool web add >"$WORK/result.json"
echo "== runtime result (the default network's, CNI $(sed -n 's/.*"cniVersion": *"\([^"]*\)".*/\1/p' "$WORK/result.json" | head -1))"
cat "$WORK/result.json"
echo
echo "== ip addr inside the pod's network namespace"
ip -n "$NETNS" -brief addr
echo
echo "== extension overrides: blue's first selection says \"io.plexus.overrides\": {\"mtu\": 1400}"
ip -n "$NETNS" -o link show net1 | sed 's/^[0-9]*: \([^:]*\):.* \(mtu [0-9]*\).*/\1 \2/'
ip -n "$NETNS" -o link show blue1 | sed 's/^[0-9]*: \([^:]*\):.* \(mtu [0-9]*\).*/\1 \2 (the second selection of blue, without the key)/' 
echo
echo "== k8s.v1.cni.cncf.io/network-status (extension enricher added the io.plexus.status.* keys)"
cat "$WORK/manifests/status/demo_web.json"
echo
echo "== plexusctl explain pod -f pod.yaml: why demo/web has its networks"
"$BIN/plexusctl" explain pod -f "$WORK/manifests/pod.yaml" --nad "$WORK/manifests/networks.yaml" \
	--policy "$POLICIES/library" --policy "$POLICIES/baseline.yaml" --extensions "$WORK/extensions.json" || true
echo
echo "== DEL demo/web"
cnitool web del
echo "interfaces left in the namespace: $(ip -n "$NETNS" -brief link | grep -cv '^lo ' || true)"
echo "leases left: $(find "$WORK/ipam" -type f ! -name 'last_reserved_ip*' ! -name lock | wc -l)"
