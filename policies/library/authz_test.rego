package plexus.authz_test

import data.plexus.authz
import data.plexus.test.fixtures

all_enabled := {
	"namespace_isolation": {"enabled": true, "global_namespaces": ["shared"]},
	"nad_allowlist": {"enabled": true},
	"max_attachments": {"enabled": true, "max": 4},
	"static_ip_range": {"enabled": true, "namespaces": {"team-a": ["10.10.0.0/24"]}},
	"mac_request": {"enabled": true, "namespaces": []},
	"interface_request": {"enabled": true, "namespaces": []},
}

test_plain_selection_is_allowed_by_every_rule if {
	authz.decision == {"allowed": true, "reasons": []} with input as fixtures.input_doc
		with data.plexus.config as all_enabled
}

test_no_config_allows if {
	authz.decision.allowed with input as fixtures.input_with({"nad": {"namespace": "elsewhere"}})
}

test_denials_of_several_rules_are_all_reported if {
	bad := fixtures.input_with({
		"nad": {"namespace": "elsewhere"},
		"selection": object.union(fixtures.element, {"mac": "02:00:00:00:00:01", "interface": "x0"}),
	})
	d := authz.decision with input as bad with data.plexus.config as all_enabled
	d.allowed == false
	{r.code | some r in d.reasons} == {"namespace-isolation", "mac-not-allowed", "interface-not-allowed"}
}

test_disabled_rule_does_not_count if {
	cfg := object.union(all_enabled, {"namespace_isolation": {"enabled": false}})
	authz.decision.allowed with input as fixtures.input_with({"nad": {"namespace": "elsewhere"}})
		with data.plexus.config as cfg
}

test_enabled_unknown_rule_denies if {
	d := authz.decision with input as fixtures.input_doc
		with data.plexus.config as {"namespace_isolaton": {"enabled": true}}
	d.allowed == false
	d.reasons[0].code == "unknown-rule"
	contains(d.reasons[0].message, "namespace_isolaton")
}

test_other_input_version_denies if {
	d := authz.decision with input as fixtures.input_with({"version": "plexus.policy/v0"})
	d.allowed == false
	d.reasons[0].code == "input-version"
}
