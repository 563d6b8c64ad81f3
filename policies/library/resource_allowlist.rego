# resource_allowlist: device resources (the NAD's
# k8s.v1.cni.cncf.io/resourceName, input.device.resourceName) are scarce
# and node-wide, so a namespace may only attach through those the admin
# lists for it. Attachments without a device resource are not affected.
#
# data.plexus.config.resource_allowlist:
#   enabled: true
#   namespaces: {telco: ["vendor.example/sriov_a"]}
#   all_namespaces: ["vendor.example/shared"]
package plexus.rules.resource_allowlist

import data.plexus.lib

deny contains {"code": "resource-not-allowed", "message": msg} if {
	res := input.device.resourceName
	res != ""
	not _listed(res)
	msg := sprintf(
		"pod %s may not use network %s: namespace %q may not use device resource %q (not listed in resource_allowlist)",
		[lib.pod_ref, lib.nad_ref, input.pod.namespace, res],
	)
}

_listed(res) if {
	some r in lib.config("resource_allowlist").namespaces[input.pod.namespace]
	r == res
}

_listed(res) if {
	some r in lib.config("resource_allowlist").all_namespaces
	r == res
}
