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
# 6 value list (already checked value by value). One regex call parses the
# whole selector: this runs on every decision, and OPA's evaluation cost
# grows with every expression, so the parser does as little as it can.
_requirements := `(?:^|,)\s*(!?)\s*([A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?)(?:\s*(==|=|!=)\s*((?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?)|\s+(in|notin)\s*\(\s*([A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?(?:\s*,\s*[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)*)\s*\))?\s*`

# parse returns the requirements of a valid selector, and is undefined for
# an invalid one: the matches must spell out the whole selector, so any
# text they skip makes it invalid. A requirement is {"key", "positive",
# "values"}: it holds when "the label is present (with one of values,
# unless values is null)" equals positive.
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
		_present(r, labels) == r.positive
	}
}

_positive := {"": true, "=": true, "==": true, "!=": false, "in": true, "notin": false}

# "!k" takes no operator; "!k=v" is invalid and leaves this undefined.
_requirement_of(m) := {"key": m[2], "positive": false, "values": null} if {
	m[1] == "!"
	m[3] == ""
	m[5] == ""
} else := {"key": m[2], "positive": _positive[op], "values": _values(m[4], m[6], op)} if {
	m[1] == ""
	op := concat("", [m[3], m[5]])
}

_values(_, _, "") := null

_values(v, _, op) := [v] if endswith(op, "=")

_values(_, list, op) := [trim_space(x) | some x in split(list, ",")] if endswith(op, "in")

_present(r, labels) if {
	labels[r.key]
	r.values == null
} else if {
	labels[r.key] in r.values
} else := false
