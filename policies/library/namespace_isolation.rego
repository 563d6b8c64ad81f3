# namespace_isolation: a pod may use the networks of its own namespace and
# of the namespaces the admin lists as global (the same intent as Multus'
# namespaceIsolation with globalNamespaces). No namespace is global unless
# listed, "default" included.
#
# data.plexus.config.namespace_isolation:
#   enabled: true
#   global_namespaces: ["shared-networks"]
package plexus.rules.namespace_isolation

import data.plexus.lib

deny contains {"code": "namespace-isolation", "message": msg} if {
	input.nad.namespace != input.pod.namespace
	not _global(input.nad.namespace)
	msg := sprintf(
		"pod %s may not use network %s: namespace %q is neither the pod's namespace nor a global namespace",
		[lib.pod_ref, lib.nad_ref, input.nad.namespace],
	)
}

_global(ns) if ns in lib.config("namespace_isolation").global_namespaces
