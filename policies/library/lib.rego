# Helpers shared by the plexus rule library.
package plexus.lib

input_version := "plexus.policy/v1"

# pod_ref and nad_ref name the pod and the network in messages; they are
# always defined so that a message can never make a deny entry undefined.
pod_ref := sprintf("%s/%s", [input.pod.namespace, input.pod.name]) if {
	input.pod.name
} else := "(unknown pod)"

nad_ref := sprintf("%s/%s", [input.nad.namespace, input.nad.name]) if {
	input.nad.name
} else := sprintf("%s/%s", [input.selection.namespace, input.selection.name]) if {
	input.selection.name
} else := "(unknown network)"

# config is a rule's admin data, data.plexus.config[rule], or {}.
config(rule) := c if {
	c := data.plexus.config[rule]
} else := {}
