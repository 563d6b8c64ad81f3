package plexus.rules.host_ports_test

import data.plexus.rules.host_ports
import data.plexus.test.fixtures

cfg := {"host_ports": {"enabled": true, "min_host_port": 1024}}

mapping(host_port) := {"hostPort": host_port, "containerPort": 8080}

mapping_input(mappings) := fixtures.selection_with({"raw": {"name": "blue", "portMappings": mappings}})

test_no_port_mappings_is_allowed if {
	count(host_ports.deny) == 0 with input as fixtures.input_doc with data.plexus.config as cfg
}

test_high_host_port_is_allowed if {
	count(host_ports.deny) == 0 with input as mapping_input([mapping(8080), mapping(1024)])
		with data.plexus.config as cfg
}

test_low_host_port_is_denied if {
	d := host_ports.deny with input as mapping_input([mapping(22)]) with data.plexus.config as cfg
	fixtures.codes(d) == {"host-port"}
	fixtures.mentions(d, ["team-a/web-0", "team-a/blue", "host port 22", "portMappings[0]", "below 1024"])
}

test_every_mapping_is_checked if {
	d := host_ports.deny with input as mapping_input([mapping(8080), mapping(443)]) with data.plexus.config as cfg
	fixtures.mentions(d, ["host port 443", "portMappings[1]"])
}

# A mapping bound to one host address still takes the node's port.
test_host_ip_does_not_matter if {
	loopback := object.union(mapping(22), {"hostIP": "127.0.0.1", "protocol": "udp"})
	d := host_ports.deny with input as mapping_input([loopback]) with data.plexus.config as cfg
	fixtures.codes(d) == {"host-port"}
}

test_default_bound_is_1024 if {
	d := host_ports.deny with input as mapping_input([mapping(1023)])
		with data.plexus.config as {"host_ports": {"enabled": true}}
	fixtures.mentions(d, ["host port 1023", "below 1024"])
}

test_bound_is_configurable if {
	count(host_ports.deny) == 0 with input as mapping_input([mapping(80)])
		with data.plexus.config as {"host_ports": {"enabled": true, "min_host_port": 80}}
}

test_mapping_without_host_port_is_denied if {
	d := host_ports.deny with input as mapping_input([{"containerPort": 80}]) with data.plexus.config as cfg
	fixtures.mentions(d, ["host port null"])
}

test_port_mappings_not_a_list_is_denied if {
	d := host_ports.deny with input as mapping_input({"hostPort": 22}) with data.plexus.config as cfg
	fixtures.mentions(d, ["not a list"])
}

test_bound_not_a_number_denies if {
	d := host_ports.deny with input as fixtures.input_doc
		with data.plexus.config as {"host_ports": {"enabled": true, "min_host_port": "1024"}}
	fixtures.codes(d) == {"host-port"}
	fixtures.mentions(d, ["min_host_port is not a number"])
}

test_pod_default_network_is_not_its_business if {
	pod_default := fixtures.input_with({"origin": "podDefaultNetwork", "default": true, "selection": null})
	count(host_ports.deny) == 0 with input as pod_default with data.plexus.config as cfg
}
