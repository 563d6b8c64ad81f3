package plexus.rules.interface_request_test

import data.plexus.rules.interface_request
import data.plexus.test.fixtures

cfg := {"interface_request": {"enabled": true, "namespaces": ["telco"]}}

if_input := fixtures.selection_with({"interface": "data0"})

test_no_interface_request_is_allowed if {
	count(interface_request.deny) == 0 with input as fixtures.input_doc with data.plexus.config as cfg
}

test_interface_request_from_listed_namespace_is_allowed if {
	count(interface_request.deny) == 0 with input as object.union(if_input, {"pod": {"namespace": "telco"}})
		with data.plexus.config as cfg
}

test_interface_request_from_other_namespace_is_denied if {
	d := interface_request.deny with input as if_input with data.plexus.config as cfg
	fixtures.codes(d) == {"interface-not-allowed"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "data0"])
}

test_interface_request_without_namespace_list_is_denied if {
	d := interface_request.deny with input as if_input with data.plexus.config as {"interface_request": {"enabled": true}}
	fixtures.codes(d) == {"interface-not-allowed"}
}
