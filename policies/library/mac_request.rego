# mac_request: only pods of the listed namespaces may request a MAC address
# (s4.1.2.1.4) for a secondary interface.
#
# data.plexus.config.mac_request:
#   enabled: true
#   namespaces: ["telco"]
package plexus.rules.mac_request

import data.plexus.lib

deny contains {"code": "mac-not-allowed", "message": msg} if {
	input.selection.mac
	not _allowed
	msg := sprintf(
		"pod %s may not use network %s with MAC %s: namespace %q may not request MAC addresses",
		[lib.pod_ref, lib.nad_ref, input.selection.mac, input.pod.namespace],
	)
}

# Kept out of the negation above: "not x in undefined" is false in OPA, which
# would let the request through when the admin lists no namespaces.
_allowed if input.pod.namespace in lib.config("mac_request").namespaces
