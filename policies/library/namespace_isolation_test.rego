package plexus.rules.namespace_isolation_test

import data.plexus.rules.namespace_isolation
import data.plexus.test.fixtures

cfg := {"namespace_isolation": {"enabled": true, "global_namespaces": ["shared"]}}

test_network_of_own_namespace_is_allowed if {
	count(namespace_isolation.deny) == 0 with input as fixtures.input_doc
		with data.plexus.config as cfg
}

test_network_of_global_namespace_is_allowed if {
	count(namespace_isolation.deny) == 0 with input as fixtures.input_with({"nad": {"namespace": "shared"}})
		with data.plexus.config as cfg
}

test_network_of_other_namespace_is_denied if {
	d := namespace_isolation.deny with input as fixtures.input_with({"nad": {"namespace": "team-b"}})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"namespace-isolation"}
	fixtures.mentions(d, ["team-a/web-0", "team-b/blue", `"team-b"`])
}

test_without_global_list_other_namespace_is_denied if {
	d := namespace_isolation.deny with input as fixtures.input_with({"nad": {"namespace": "shared"}})
		with data.plexus.config as {"namespace_isolation": {"enabled": true}}
	fixtures.codes(d) == {"namespace-isolation"}
}

test_default_namespace_is_not_implicitly_global if {
	d := namespace_isolation.deny with input as fixtures.input_with({"nad": {"namespace": "default"}})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"namespace-isolation"}
}
