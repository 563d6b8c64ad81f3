package codes

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// docFile holds the table of error codes.
const docFile = "docs/configuration.md"

// Code is one of plexus's CNI error codes: its name here and what it
// means, as docFile's table of error codes begins to say it.
type Code struct {
	Code    uint
	Name    string
	Meaning string
}

// Table lists plexus's own CNI error codes in order.
func Table() []Code {
	return []Code{
		{InvalidSelection, "InvalidSelection", "invalid selection annotation"},
		{NetworkNotFound, "NetworkNotFound", "a NAD is missing or cannot be resolved"},
		{PolicyDenied, "PolicyDenied", "denied by policy (s7.4)"},
		{Extension, "Extension", "an extension rejected or failed the attachment"},
		{AttachFailed, "AttachFailed", "a delegate ADD failed"},
		{NotHonored, "NotHonored", "requested ips or mac were not assigned"},
		{PodLookup, "PodLookup", "the pod could not be read"},
		{Status, "Status", "network-status could not be published"},
		{Record, "Record", "the attachment record could not be written"},
		{DetachFailed, "DetachFailed", "one or more delegate DELs failed"},
		{CheckFailed, "CheckFailed", "a delegate CHECK failed"},
		{InterfaceConflict, "InterfaceConflict", "a requested interface name is already used"},
		{ClusterNetwork, "ClusterNetwork", "the default network cannot be loaded"},
		{GarbageCollection, "GarbageCollection", "GC could not finish"},
		{DefaultNotReady, "DefaultNotReady", "STATUS: the default network is not ready"},
		{DaemonUnreachable, "DaemonUnreachable", "thick mode: plexusd could not be reached"},
		{DefaultRoute, "DefaultRoute", "default-route could not be applied"},
		{Devices, "Devices", "the pod's devices"},
	}
}

// docRow is one row of docFile's table of error codes.
type docRow struct {
	name, meaning string
}

// docCodes reads the table under docFile's "## Error codes":
// | code | name | meaning |.
func docCodes(t *testing.T) map[uint]docRow {
	t.Helper()
	b, err := os.ReadFile("../../" + docFile)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Error codes\n")
	if !ok {
		t.Fatalf(`%s has no "## Error codes" section`, docFile)
	}
	section, _, _ = strings.Cut(section, "\n#")
	rows := map[uint]docRow{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) != 3 {
			continue
		}
		code, err := strconv.ParseUint(cells[0], 10, 32)
		if err != nil {
			continue // the header
		}
		if _, dup := rows[uint(code)]; dup {
			t.Errorf("%s lists code %d twice", docFile, code)
		}
		rows[uint(code)] = docRow{name: strings.Trim(cells[1], "`"), meaning: strings.ReplaceAll(cells[2], "`", "")}
	}
	return rows
}

// docFile's table lists exactly the codes of Table, with their names,
// each meaning beginning as Table's does.
func TestDocListsEveryCode(t *testing.T) {
	rows := docCodes(t)
	for _, c := range Table() {
		row, ok := rows[c.Code]
		switch {
		case !ok:
			t.Errorf("%s does not list code %d (%s)", docFile, c.Code, c.Name)
		case row.name != c.Name:
			t.Errorf("%s names code %d %q, want %q", docFile, c.Code, row.name, c.Name)
		case !strings.HasPrefix(row.meaning, c.Meaning):
			t.Errorf("%s says code %d (%s) means %q, want it to begin %q", docFile, c.Code, c.Name, row.meaning, c.Meaning)
		}
		delete(rows, c.Code)
	}
	for code, row := range rows {
		t.Errorf("%s lists code %d (%s), which plexus does not have", docFile, code, row.name)
	}
}

func TestTableIsInOrderFromOneHundred(t *testing.T) {
	for i, c := range Table() {
		if c.Code != InvalidSelection+uint(i) {
			t.Errorf("Table()[%d] is code %d, want %d", i, c.Code, InvalidSelection+uint(i))
		}
	}
}
