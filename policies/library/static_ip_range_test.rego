package plexus.rules.static_ip_range_test

import data.plexus.rules.static_ip_range
import data.plexus.test.fixtures

cfg := {"static_ip_range": {"enabled": true, "namespaces": {"team-a": ["10.10.0.0/24", "fd00:a::/64"]}}}

requesting(ips) := fixtures.selection_with({"ips": ips})

test_no_static_address_is_allowed if {
	count(static_ip_range.deny) == 0 with input as fixtures.input_doc with data.plexus.config as cfg
}

test_addresses_in_range_are_allowed if {
	count(static_ip_range.deny) == 0 with input as requesting(["10.10.0.5", "fd00:a::5/64", "10.10.0.6/24"])
		with data.plexus.config as cfg
}

test_address_out_of_range_is_denied if {
	d := static_ip_range.deny with input as requesting(["10.10.0.5", "10.20.0.5/24"])
		with data.plexus.config as cfg
	fixtures.codes(d) == {"static-ip-range"}
	count(d) == 1
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "10.20.0.5/24", "10.10.0.0/24"])
}

test_namespace_without_ranges_may_not_request_addresses if {
	other := object.union(requesting(["10.10.0.5"]), {"pod": {"namespace": "team-b"}})
	d := static_ip_range.deny with input as other with data.plexus.config as cfg
	fixtures.codes(d) == {"static-ip-range"}
}
