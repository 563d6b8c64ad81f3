package plexus.lib_test

import data.plexus.lib

test_refs_name_pod_and_network if {
	lib.pod_ref == "a/p" with input as {"pod": {"namespace": "a", "name": "p"}, "nad": {"namespace": "b", "name": "n"}}
	lib.nad_ref == "b/n" with input as {"pod": {"namespace": "a", "name": "p"}, "nad": {"namespace": "b", "name": "n"}}
}

test_network_ref_falls_back_to_the_selection if {
	lib.nad_ref == "c/s" with input as {"selection": {"namespace": "c", "name": "s"}}
}

test_refs_are_defined_without_pod_or_network if {
	lib.pod_ref == "(unknown pod)" with input as {}
	lib.nad_ref == "(unknown network)" with input as {}
}

test_config_of_unconfigured_rule_is_empty if {
	lib.config("nothing") == {} with data.plexus.config as {}
	lib.config("x") == {"enabled": true} with data.plexus.config as {"x": {"enabled": true}}
}
