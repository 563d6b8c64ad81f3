package plexus.rules.mac_request_test

import data.plexus.rules.mac_request
import data.plexus.test.fixtures

cfg := {"mac_request": {"enabled": true, "namespaces": ["telco"]}}

mac_input := fixtures.selection_with({"mac": "02:00:00:00:00:01"})

test_no_mac_request_is_allowed if {
	count(mac_request.deny) == 0 with input as fixtures.input_doc with data.plexus.config as cfg
}

test_mac_request_from_listed_namespace_is_allowed if {
	count(mac_request.deny) == 0 with input as object.union(mac_input, {"pod": {"namespace": "telco"}})
		with data.plexus.config as cfg
}

test_mac_request_from_other_namespace_is_denied if {
	d := mac_request.deny with input as mac_input with data.plexus.config as cfg
	fixtures.codes(d) == {"mac-not-allowed"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "02:00:00:00:00:01"])
}

test_mac_request_without_namespace_list_is_denied if {
	d := mac_request.deny with input as mac_input with data.plexus.config as {"mac_request": {"enabled": true}}
	fixtures.codes(d) == {"mac-not-allowed"}
}
