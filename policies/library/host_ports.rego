# host_ports: a selection element's Multus-style "portMappings" (the CNI
# portMappings capability) may not claim a host port below a bound. A
# mapping DNATs traffic for the node's port to the pod, which PodSecurity's
# hostPort checks never see (they read the pod spec, not annotations).
#
# The element is judged as written (input.selection.raw), every mapping of
# it, whether or not plexus passes the mappings on. hostIP and protocol do
# not matter: a port taken on one host address, 127.0.0.1 included, is
# still the node's port.
#
# data.plexus.config.host_ports:
#   enabled: true
#   min_host_port: 1024     # absent: 1024; 65536 refuses every mapping
package plexus.rules.host_ports

import data.plexus.lib

default_min_host_port := 1024

min_host_port := n if {
	n := lib.config("host_ports").min_host_port
} else := default_min_host_port

deny contains {"code": "host-port", "message": msg} if {
	is_number(min_host_port)
	some i, pm in _mappings
	not _allowed(pm)
	msg := sprintf(
		"pod %s may not use network %s: selection element %v maps host port %v (portMappings[%v]); host ports below %v are refused",
		[lib.pod_ref, lib.nad_ref, input.selection.index, _host_port(pm), i, min_host_port],
	)
}

# Annotation parsing refuses a portMappings that is not a list; deny
# rather than allow if one reaches the policy anyway.
deny contains {"code": "host-port", "message": msg} if {
	m := _mappings
	not is_array(m)
	msg := sprintf(
		"pod %s may not use network %s: selection element %v has a portMappings that is not a list",
		[lib.pod_ref, lib.nad_ref, input.selection.index],
	)
}

# Enabled with a bound that is not a number is a configuration mistake;
# deny rather than guess.
deny contains {"code": "host-port", "message": msg} if {
	not is_number(min_host_port)
	msg := sprintf(
		"pod %s may not use network %s: host_ports is enabled but min_host_port is not a number",
		[lib.pod_ref, lib.nad_ref],
	)
}

_mappings := input.selection.raw.portMappings

# A mapping without a numeric hostPort is not allowed either.
_allowed(pm) if {
	is_number(_host_port(pm))
	_host_port(pm) >= min_host_port
}

# Always defined, so that the message cannot make a deny entry undefined.
_host_port(pm) := p if {
	p := pm.hostPort
} else := null
