# Kubernetes label selectors in their string form (as kubectl -l takes
# them): comma-separated requirements, each one of
#   key            the label exists
#   !key           the label does not exist
#   key=value      also key==value
#   key!=value     the label is absent or has another value
#   key in (a,b)   the label has one of the values
#   key notin (a,b) the label is absent or has none of the values
# All requirements must hold; the empty selector matches every pod.
package plexus.lib.selector

# One match per requirement; every match after the first starts with the
# comma that separates it from the previous one (commas inside "(...)" do
# not separate). Groups: 1 "!", 2 key, 3 =|==|!=, 4 value, 5 in|notin,
# 6 value list. One regex call parses the whole selector.
_requirements := `(?:^|,)\s*(!?)\s*([A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?)(?:\s*(==|=|!=)\s*((?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?)|\s+(in|notin)\s*\(([^()]*)\))?\s*`

_value := `^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$`

_eq_ops := {"=": "=", "==": "=", "!=": "!="}

# parse returns the requirements of a valid selector, and is undefined for
# an invalid one: the matches must spell out the whole selector, so any
# text they skip makes it invalid.
parse(sel) := reqs if {
	not startswith(sel, ",")
	ms := regex.find_all_string_submatch_n(_requirements, sel, -1)
	concat("", [m[0] | some m in ms]) == sel
	reqs := [r | some m in ms; r := _requirement_of(m)]
	count(reqs) == count(ms)
}

valid(sel) if parse(sel)

# matches holds when labels satisfy every requirement of a valid selector.
matches(sel, labels) if satisfied_by(parse(sel), labels)

# satisfied_by holds when labels satisfy every parsed requirement.
satisfied_by(reqs, labels) if {
	every r in reqs {
		_satisfied(r, labels)
	}
}

_requirement_of(m) := {"key": m[2], "op": "!", "values": []} if {
	m[1] == "!"
	m[3] == ""
	m[5] == ""
}

_requirement_of(m) := {"key": m[2], "op": "exists", "values": []} if {
	m[1] == ""
	m[3] == ""
	m[5] == ""
}

_requirement_of(m) := {"key": m[2], "op": _eq_ops[m[3]], "values": [m[4]]} if {
	m[1] == ""
	m[3] != ""
}

_requirement_of(m) := {"key": m[2], "op": m[5], "values": vs} if {
	m[1] == ""
	m[5] != ""
	vs := [trim_space(v) | some v in split(m[6], ",")]
	every v in vs {
		regex.match(_value, v)
	}
}

_satisfied(r, labels) if {
	r.op == "exists"
	labels[r.key]
}

_satisfied(r, labels) if {
	r.op == "!"
	not labels[r.key]
}

_satisfied(r, labels) if {
	r.op == "="
	labels[r.key] == r.values[0]
}

_satisfied(r, labels) if {
	r.op == "!="
	not labels[r.key] == r.values[0]
}

_satisfied(r, labels) if {
	r.op == "in"
	labels[r.key] in r.values
}

_satisfied(r, labels) if {
	r.op == "notin"
	not _value_in(labels, r.key, r.values)
}

# A helper, because "not labels[k] in vs" would be false, not true, for a
# missing label: OPA evaluates the operands of "in" before the negation.
_value_in(labels, key, values) if labels[key] in values
