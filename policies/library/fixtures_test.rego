# Shared inputs for the library's tests: pod team-a/web-0 selecting the
# network team-a/blue with nothing special requested.
package plexus.test.fixtures

element := {"index": 0, "name": "blue", "namespace": "team-a", "raw": {"name": "blue"}}

input_doc := {
	"version": "plexus.policy/v1",
	"pod": {
		"namespace": "team-a",
		"name": "web-0",
		"uid": "0b9e1c1e-0000-4000-8000-000000000001",
		"labels": {"app": "web", "tier": "gold"},
		"annotations": {},
		"serviceAccountName": "default",
		"nodeName": "node-1",
	},
	"namespace": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
	"nad": {
		"namespace": "team-a",
		"name": "blue",
		"labels": {},
		"annotations": {},
		"config": {"cniVersion": "1.0.0", "name": "blue", "plugins": ["macvlan"], "ipam": ["static"]},
	},
	"selection": element,
	"selections": [element],
	"interface": "net1",
	"default": false,
	"origin": "selection",
}

# input_with merges patch into input_doc (objects recursively; arrays and
# scalars replace).
input_with(patch) := object.union(input_doc, patch)

# selection_with changes the selection element.
selection_with(patch) := input_with({"selection": object.union(element, patch)})

codes(deny) := {r.code | some r in deny}

# mentions holds when some deny entry's message contains every string.
mentions(deny, strs) if {
	some r in deny
	every s in strs {
		contains(r.message, s)
	}
}
