# interface_request: only pods of the listed namespaces may choose the
# interface name (s4.1.2.1.5) of a secondary attachment.
#
# data.plexus.config.interface_request:
#   enabled: true
#   namespaces: ["telco"]
package plexus.rules.interface_request

import data.plexus.lib

deny contains {"code": "interface-not-allowed", "message": msg} if {
	input.selection.interface
	not _allowed
	msg := sprintf(
		"pod %s may not use network %s with interface %s: namespace %q may not choose interface names",
		[lib.pod_ref, lib.nad_ref, input.selection.interface, input.pod.namespace],
	)
}

# Kept out of the negation above; see mac_request.
_allowed if input.pod.namespace in lib.config("interface_request").namespaces
