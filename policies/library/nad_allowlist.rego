# nad_allowlist: the network's owner names who may use it, with annotations
# on the NetworkAttachmentDefinition:
#   plexus.io/allowed-namespaces: "team-a, team-b"
#       the pod's namespace must be listed (the NAD's own namespace is not
#       implied; an empty value allows no namespace);
#   plexus.io/allowed-pod-selector: "app=db,tier in (gold,silver),!debug"
#       the pod's labels must match this Kubernetes label selector
#       (plexus.lib.selector); a selector that does not parse denies.
# With both annotations, both must hold. A NAD with neither is unrestricted,
# unless the admin requires an allow list:
#
# data.plexus.config.nad_allowlist:
#   enabled: true
#   require_allowlist: false
package plexus.rules.nad_allowlist

import data.plexus.lib
import data.plexus.lib.selector

namespaces_annotation := "plexus.io/allowed-namespaces"

selector_annotation := "plexus.io/allowed-pod-selector"

deny contains {"code": "nad-allowlist", "message": msg} if {
	list := input.nad.annotations[namespaces_annotation]
	not _namespace_listed
	msg := sprintf(
		"pod %s may not use network %s: namespace %q is not in the network's %s annotation (%q)",
		[lib.pod_ref, lib.nad_ref, input.pod.namespace, namespaces_annotation, list],
	)
}

# An existence check, not a set of the listed namespaces: it stops at the
# first match and builds nothing.
_namespace_listed if {
	some part in split(input.nad.annotations[namespaces_annotation], ",")
	trim_space(part) == input.pod.namespace
}

# The selector is parsed once per decision and shared by the rules below.
_requirements := selector.parse(input.nad.annotations[selector_annotation])

deny contains {"code": "nad-allowlist", "message": msg} if {
	sel := input.nad.annotations[selector_annotation]
	not _requirements
	msg := sprintf(
		"pod %s may not use network %s: the network's %s annotation (%q) is not a valid label selector",
		[lib.pod_ref, lib.nad_ref, selector_annotation, sel],
	)
}

deny contains {"code": "nad-allowlist", "message": msg} if {
	sel := input.nad.annotations[selector_annotation]
	not selector.satisfied_by(_requirements, input.pod.labels)
	msg := sprintf(
		"pod %s may not use network %s: the pod's labels do not match the network's %s annotation (%q)",
		[lib.pod_ref, lib.nad_ref, selector_annotation, sel],
	)
}

deny contains {"code": "nad-allowlist", "message": msg} if {
	lib.config("nad_allowlist").require_allowlist == true
	input.nad.name
	not input.nad.annotations[namespaces_annotation]
	not input.nad.annotations[selector_annotation]
	msg := sprintf(
		"pod %s may not use network %s: the network has neither a %s nor a %s annotation, and the admin requires one",
		[lib.pod_ref, lib.nad_ref, namespaces_annotation, selector_annotation],
	)
}
