package plexus.rules.pod_default_network_test

import data.plexus.rules.pod_default_network
import data.plexus.test.fixtures

cfg := {"pod_default_network": {"enabled": true, "namespaces": ["team-a"], "networks": ["kube-system/calico"]}}

pod_default := fixtures.input_with({
	"origin": "podDefaultNetwork",
	"default": true,
	"selection": null,
	"interface": "eth0",
	"nad": {"namespace": "kube-system", "name": "calico"},
})

test_listed_namespace_and_network_is_allowed if {
	count(pod_default_network.deny) == 0 with input as pod_default
		with data.plexus.config as cfg
}

test_unlisted_namespace_is_denied if {
	d := pod_default_network.deny with input as object.union(pod_default, {"pod": {"namespace": "team-b"}})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"pod-default-network"}
	fixtures.mentions(d, ["team-b/web-0", "kube-system/calico", `"team-b"`])
}

test_unlisted_network_is_denied if {
	d := pod_default_network.deny with input as object.union(pod_default, {"nad": {"name": "flannel"}})
		with data.plexus.config as cfg
	fixtures.codes(d) == {"pod-default-network"}
	fixtures.mentions(d, ["kube-system/flannel", "not one of"])
}

test_without_namespaces_every_pod_default_is_denied if {
	d := pod_default_network.deny with input as pod_default
		with data.plexus.config as {"pod_default_network": {"enabled": true}}
	fixtures.codes(d) == {"pod-default-network"}
}

test_without_networks_any_network_is_allowed if {
	count(pod_default_network.deny) == 0 with input as object.union(pod_default, {"nad": {"name": "flannel"}})
		with data.plexus.config as {"pod_default_network": {"enabled": true, "namespaces": ["team-a"]}}
}

test_selections_are_not_its_business if {
	count(pod_default_network.deny) == 0 with input as fixtures.input_doc
		with data.plexus.config as {"pod_default_network": {"enabled": true}}
}
