package plexus.rules.nad_allowlist_test

import data.plexus.rules.nad_allowlist
import data.plexus.test.fixtures

cfg := {"nad_allowlist": {"enabled": true}}

with_annotations(a) := fixtures.input_with({"nad": {"annotations": a}})

test_network_without_annotations_is_unrestricted if {
	count(nad_allowlist.deny) == 0 with input as fixtures.input_doc with data.plexus.config as cfg
}

test_required_allowlist_denies_network_without_annotations if {
	d := nad_allowlist.deny with input as fixtures.input_doc
		with data.plexus.config as {"nad_allowlist": {"enabled": true, "require_allowlist": true}}
	fixtures.codes(d) == {"nad-allowlist"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "requires"])
}

test_listed_namespace_is_allowed if {
	count(nad_allowlist.deny) == 0 with input as with_annotations({"plexus.io/allowed-namespaces": "team-b, team-a"})
		with data.plexus.config as cfg
}

test_unlisted_namespace_is_denied if {
	d := nad_allowlist.deny with input as with_annotations({"plexus.io/allowed-namespaces": "team-b,team-c"})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"nad-allowlist"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "team-b,team-c"])
}

test_empty_namespace_list_allows_nobody if {
	d := nad_allowlist.deny with input as with_annotations({"plexus.io/allowed-namespaces": ""})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"nad-allowlist"}
}

test_matching_pod_selector_is_allowed if {
	count(nad_allowlist.deny) == 0 with input as with_annotations({"plexus.io/allowed-pod-selector": "app=web,tier in (gold, silver),!debug"})
		with data.plexus.config as cfg
}

test_non_matching_pod_selector_is_denied if {
	d := nad_allowlist.deny with input as with_annotations({"plexus.io/allowed-pod-selector": "app=db"})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"nad-allowlist"}
	fixtures.mentions(d, ["do not match", "app=db"])
}

test_invalid_pod_selector_is_denied if {
	d := nad_allowlist.deny with input as with_annotations({"plexus.io/allowed-pod-selector": "app in (web"})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"nad-allowlist"}
	fixtures.mentions(d, ["not a valid label selector"])
}

test_both_annotations_must_hold if {
	d := nad_allowlist.deny with input as with_annotations({
		"plexus.io/allowed-namespaces": "team-a",
		"plexus.io/allowed-pod-selector": "app=db",
	})
		with data.plexus.config as cfg
	count(d) == 1
}
