# max_attachments: a cap on the number of secondary attachments (selection
# elements, s4.2: a repeated network counts each time) of one pod.
#
# data.plexus.config.max_attachments:
#   enabled: true
#   max: 4                    # every namespace not listed below
#   namespaces: {telco: 16}   # optional per-namespace caps
package plexus.rules.max_attachments

import data.plexus.lib

limit := n if {
	n := lib.config("max_attachments").namespaces[input.pod.namespace]
} else := n if {
	n := lib.config("max_attachments").max
} else := null

deny contains {"code": "max-attachments", "message": msg} if {
	is_number(limit)
	count(input.selections) > limit
	msg := sprintf(
		"pod %s may not use network %s: it selects %d networks, more than the %d allowed in namespace %q",
		[lib.pod_ref, lib.nad_ref, count(input.selections), limit, input.pod.namespace],
	)
}

# Enabled without a numeric cap is a configuration mistake; deny rather
# than guess.
deny contains {"code": "max-attachments", "message": msg} if {
	not is_number(limit)
	msg := sprintf(
		"pod %s may not use network %s: max_attachments is enabled but has no numeric max for namespace %q",
		[lib.pod_ref, lib.nad_ref, input.pod.namespace],
	)
}
