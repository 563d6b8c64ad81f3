package netns

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// portmapChains are the nat chains the portmap plugin shares among all its
// containers: it creates them on the first ADD and never removes them.
const portmapChains = "CNI-HOSTPORT-DNAT CNI-HOSTPORT-SETMARK CNI-HOSTPORT-MASQ"

// removePortmapChainsAfter removes, when t ends, the portmap chains that
// did not exist when it was called (the test's ADD created them), with the
// jumps to them, for iptables and ip6tables. They stay while
// CNI-HOSTPORT-DNAT holds a rule: a container of another user needs them.
func removePortmapChainsAfter(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		before := natRules(t, tool)
		t.Cleanup(func() { removeNewPortmapChains(t, tool, before) })
	}
}

func removeNewPortmapChains(t *testing.T, tool string, before []string) {
	t.Helper()
	rules := natRules(t, tool)
	var created []string
	for _, c := range strings.Fields(portmapChains) {
		if !slices.Contains(before, "-N "+c) && slices.Contains(rules, "-N "+c) {
			created = append(created, c)
		}
	}
	if len(created) == 0 || slices.ContainsFunc(rules, func(r string) bool {
		return strings.HasPrefix(r, "-A CNI-HOSTPORT-DNAT ")
	}) {
		return
	}
	// The jumps first: a chain that is a target cannot be deleted.
	for _, r := range rules {
		f := strings.Fields(r)
		if len(f) > 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "CNI-HOSTPORT-") && slices.Contains(created, f[len(f)-1]) {
			runIPTables(t, tool, "-D"+strings.TrimPrefix(r, "-A"))
		}
	}
	for _, c := range created {
		runIPTables(t, tool, "-F "+c)
	}
	for _, c := range created {
		runIPTables(t, tool, "-X "+c)
	}
}

// natRules is `<tool> -t nat -S`, one rule or chain per element.
func natRules(t *testing.T, tool string) []string {
	t.Helper()
	out, err := exec.Command(tool, "-w", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -t nat -S: %v: %s", tool, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// runIPTables runs one nat table command given as -S prints it (through
// sh, which undoes its quoting of comments).
func runIPTables(t *testing.T, tool, args string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", tool+" -w -t nat "+args).CombinedOutput(); err != nil {
		t.Errorf("%s -t nat %s: %v: %s", tool, args, err, out)
	}
}
