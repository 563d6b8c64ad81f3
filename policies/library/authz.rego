# The plexus s7.4 decision. It combines the rules the admin enabled in data:
# a rule named N is a package data.plexus.rules.N with a "deny" set of
# {"code", "message"} objects, and it counts only while
# data.plexus.config.N.enabled is true. Admins therefore combine the shipped
# rules (and their own, in the same shape) by configuration, not by editing.
package plexus.authz

import data.plexus.lib

decision := {
	"allowed": count(deny) == 0,
	"reasons": [r | some r in deny],
}

# The enabled rules are found inline rather than through a set of their
# names: one rule less to evaluate in every decision.
deny contains r if {
	some name, cfg in data.plexus.config
	cfg.enabled == true
	some r in data.plexus.rules[name].deny
}

# An enabled rule that no module defines is a typo or a missing file; it must
# not silently allow what it was meant to deny.
deny contains {"code": "unknown-rule", "message": msg} if {
	some name, cfg in data.plexus.config
	cfg.enabled == true
	not data.plexus.rules[name].deny
	msg := sprintf("data.plexus.config.%s enables a rule, but no loaded module defines data.plexus.rules.%s.deny", [name, name])
}

# The library was written against one version of the input document.
deny contains {"code": "input-version", "message": msg} if {
	input.version != lib.input_version
	msg := sprintf("the policy library expects input version %q, got %v", [lib.input_version, input.version])
}
