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
# not separate). Groups: 1 key of "!key", 2 key, 3 =|==|!=, 4 value,
# 5 in|notin, 6 value list (each value checked by the pattern). One regex
# call parses the whole selector: this runs in every decision, and OPA's
# cost grows with every expression it evaluates, so the parser keeps the
# matches as they are instead of building requirement objects.
_requirements := `(?:^|,)\s*(?:!\s*([A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?)|([A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?)(?:\s*(==|=|!=)\s*((?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?)|\s+(in|notin)\s*\(\s*([A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?(?:\s*,\s*[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)*)\s*\))?)\s*`

# parse returns the requirements of a valid selector, one per requirement
# in the order written, and is undefined for an invalid one: the matches
# must spell out the whole selector, so any text they skip (such as "=v"
# after "!k") makes it invalid. Pass the result to satisfied_by.
parse(sel) := reqs if {
	not startswith(sel, ",")
	reqs := regex.find_all_string_submatch_n(_requirements, sel, -1)
	concat("", [m[0] | some m in reqs]) == sel
}

valid(sel) if parse(sel)

# matches holds when labels satisfy every requirement of a valid selector.
matches(sel, labels) if satisfied_by(parse(sel), labels)

# satisfied_by holds when labels satisfy every parsed requirement.
satisfied_by(reqs, labels) if {
	every m in reqs {
		_holds(m, labels)
	}
}

# Exactly one body applies to a requirement; each fails at its first
# expression for the others, the cheapest dispatch OPA offers here.
_holds(m, labels) if {
	m[1] != ""
	not labels[m[1]]
}

_holds(m, labels) if {
	concat("", [m[1], m[3], m[5]]) == ""
	labels[m[2]]
}

_holds(m, labels) if {
	m[3] in {"=", "=="}
	labels[m[2]] == m[4]
}

_holds(m, labels) if {
	m[3] == "!="
	not labels[m[2]] == m[4]
}

_holds(m, labels) if {
	m[5] == "in"
	labels[m[2]] in _values(m[6])
}

_holds(m, labels) if {
	m[5] == "notin"
	not object.get(labels, m[2], null) in _values(m[6]) # an absent label is in no list
}

# The pattern admits only spaces around the commas of a value list.
_values(list) := [trim_space(v) | some v in split(list, ",")]
