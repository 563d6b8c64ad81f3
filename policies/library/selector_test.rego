package plexus.lib.selector_test

import data.plexus.lib.selector

labels := {"app": "web", "tier": "gold", "empty": ""}

matching := [
	"",
	"app",
	"!debug",
	"app=web",
	"app==web",
	"app!=db",
	"debug!=x",
	"tier in (gold,silver)",
	"tier in ( silver , gold )",
	"tier notin (bronze)",
	"debug notin (x)",
	"app=web, tier in (gold,silver), !debug",
	"empty",
	"empty=",
]

not_matching := [
	"debug",
	"!app",
	"app=db",
	"app!=web",
	"tier in (silver)",
	"tier notin (gold,silver)",
	"app=web,debug",
]

invalid := [
	"app in (web",
	"app in ()",
	"app in (a,,b)",
	"=web",
	"!app=web",
	"app=web,,tier=gold",
	"app=we b",
	",",
	"app in web",
]

test_selectors_that_match if {
	every sel in matching {
		selector.matches(sel, labels)
	}
}

test_selectors_that_do_not_match if {
	every sel in not_matching {
		selector.valid(sel)
		not selector.matches(sel, labels)
	}
}

test_invalid_selectors_are_refused if {
	every sel in invalid {
		not selector.valid(sel)
		not selector.matches(sel, labels)
	}
}

test_parse_keeps_one_requirement_per_clause if {
	count(selector.parse("a,!b,c=1,c==1,d!=2,e in (3, 4),f notin (5)")) == 7
	count(selector.parse("")) == 0
}

test_values_are_compared_exactly if {
	selector.matches("tier in (gold)", {"tier": "gold"})
	not selector.matches("tier in (gold)", {"tier": "golden"})
	not selector.matches("tier=gol", {"tier": "gold"})
	selector.matches("tier notin (gol)", {"tier": "gold"})
}

test_prefixed_keys_are_accepted if {
	selector.matches("app.kubernetes.io/name=web", {"app.kubernetes.io/name": "web"})
}
