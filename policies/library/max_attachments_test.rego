package plexus.rules.max_attachments_test

import data.plexus.rules.max_attachments
import data.plexus.test.fixtures

cfg := {"max_attachments": {"enabled": true, "max": 2, "namespaces": {"telco": 3}}}

selecting(n) := fixtures.input_with({"selections": [fixtures.element | some _ in numbers.range(1, n)]})

test_up_to_the_cap_is_allowed if {
	count(max_attachments.deny) == 0 with input as selecting(2) with data.plexus.config as cfg
}

test_over_the_cap_is_denied if {
	d := max_attachments.deny with input as selecting(3) with data.plexus.config as cfg
	fixtures.codes(d) == {"max-attachments"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "3 networks", "the 2 allowed"])
}

test_namespace_cap_overrides_the_default if {
	telco := object.union(selecting(3), {"pod": {"namespace": "telco"}})
	count(max_attachments.deny) == 0 with input as telco with data.plexus.config as cfg
}

test_missing_cap_denies if {
	d := max_attachments.deny with input as selecting(1)
		with data.plexus.config as {"max_attachments": {"enabled": true}}
	fixtures.codes(d) == {"max-attachments"}
	fixtures.mentions(d, ["no numeric max"])
}
