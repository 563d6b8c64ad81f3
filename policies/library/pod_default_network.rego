# pod_default_network: who may replace the cluster-wide default network
# with the v1.multus-cni.io/default-network annotation (input.origin
# "podDefaultNetwork"), and with which networks. Enabled, it denies every
# pod default network unless the pod's namespace is listed and, when a
# network list is given, the network is in it. Other rules (namespace
# isolation, NAD allow lists) apply to the chosen network as well.
#
# data.plexus.config.pod_default_network:
#   enabled: true
#   namespaces: ["migration"]             # pods here may choose
#   networks: ["kube-system/calico"]      # absent: any network
package plexus.rules.pod_default_network

import data.plexus.lib

deny contains {"code": "pod-default-network", "message": msg} if {
	input.origin == "podDefaultNetwork"
	not input.pod.namespace in _namespaces
	msg := sprintf(
		"pod %s may not choose its default network (%s): namespace %q is not allowed to",
		[lib.pod_ref, lib.nad_ref, input.pod.namespace],
	)
}

deny contains {"code": "pod-default-network", "message": msg} if {
	input.origin == "podDefaultNetwork"
	networks := lib.config("pod_default_network").networks
	not lib.nad_ref in networks
	msg := sprintf(
		"pod %s may not use %s as its default network: it is not one of %v",
		[lib.pod_ref, lib.nad_ref, networks],
	)
}

_namespaces := ns if {
	ns := lib.config("pod_default_network").namespaces
} else := []
