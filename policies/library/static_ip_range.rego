# static_ip_range: addresses a pod requests with "ips" (s4.1.2.1.3) must lie
# in a CIDR the admin assigns to the pod's namespace. A namespace without
# ranges may not request static addresses at all. An address written as a
# CIDR ("10.1.0.5/24") is checked by its address part.
#
# data.plexus.config.static_ip_range:
#   enabled: true
#   namespaces:
#     team-a: ["10.10.0.0/24", "fd00:a::/64"]
package plexus.rules.static_ip_range

import data.plexus.lib

ranges := r if {
	r := lib.config("static_ip_range").namespaces[input.pod.namespace]
} else := []

deny contains {"code": "static-ip-range", "message": msg} if {
	some ip in input.selection.ips
	not _in_range(split(ip, "/")[0])
	msg := sprintf(
		"pod %s may not use network %s with address %s: it is outside the ranges assigned to namespace %q [%s]",
		[lib.pod_ref, lib.nad_ref, ip, input.pod.namespace, concat(", ", ranges)],
	)
}

_in_range(addr) if {
	some cidr in ranges
	net.cidr_contains(cidr, addr)
}
