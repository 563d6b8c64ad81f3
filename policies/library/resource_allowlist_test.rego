package plexus.rules.resource_allowlist_test

import data.plexus.rules.resource_allowlist
import data.plexus.test.fixtures

cfg := {"resource_allowlist": {
	"enabled": true,
	"namespaces": {"team-a": ["vendor.example/sriov_a"], "team-b": ["vendor.example/sriov_b"]},
	"all_namespaces": ["vendor.example/shared"],
}}

with_device(res) := fixtures.input_with({"device": {"resourceName": res, "deviceID": "0000:18:02.5"}})

test_attachment_without_device_is_unaffected if {
	count(resource_allowlist.deny) == 0 with input as fixtures.input_doc with data.plexus.config as cfg
}

test_listed_resource_is_allowed if {
	count(resource_allowlist.deny) == 0 with input as with_device("vendor.example/sriov_a")
		with data.plexus.config as cfg
}

test_resource_listed_for_all_namespaces_is_allowed if {
	count(resource_allowlist.deny) == 0 with input as with_device("vendor.example/shared")
		with data.plexus.config as cfg
}

test_other_namespaces_resource_is_denied if {
	d := resource_allowlist.deny with input as with_device("vendor.example/sriov_b")
		with data.plexus.config as cfg
	fixtures.codes(d) == {"resource-not-allowed"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "vendor.example/sriov_b"])
}

test_namespace_without_list_may_use_no_resource if {
	d := resource_allowlist.deny with input as with_device("vendor.example/sriov_a")
		with data.plexus.config as {"resource_allowlist": {"enabled": true}}
	fixtures.codes(d) == {"resource-not-allowed"}
}
