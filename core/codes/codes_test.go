package codes

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// readmeRow is one row of README.md's table of error codes.
type readmeRow struct {
	name, meaning string
}

// readmeCodes reads the table under README.md's "### Error codes":
// | code | name | meaning |.
func readmeCodes(t *testing.T) map[uint]readmeRow {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### Error codes\n")
	if !ok {
		t.Fatal(`README.md has no "### Error codes" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	rows := map[uint]readmeRow{}
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
			t.Errorf("README.md lists code %d twice", code)
		}
		rows[uint(code)] = readmeRow{name: strings.Trim(cells[1], "`"), meaning: strings.ReplaceAll(cells[2], "`", "")}
	}
	return rows
}

// README.md's table lists exactly the codes of Table, with their names,
// each meaning beginning as Table's does.
func TestReadmeListsEveryCode(t *testing.T) {
	rows := readmeCodes(t)
	for _, c := range Table() {
		row, ok := rows[c.Code]
		switch {
		case !ok:
			t.Errorf("README.md does not list code %d (%s)", c.Code, c.Name)
		case row.name != c.Name:
			t.Errorf("README.md names code %d %q, want %q", c.Code, row.name, c.Name)
		case !strings.HasPrefix(row.meaning, c.Meaning):
			t.Errorf("README.md says code %d (%s) means %q, want it to begin %q", c.Code, c.Name, row.meaning, c.Meaning)
		}
		delete(rows, c.Code)
	}
	for code, row := range rows {
		t.Errorf("README.md lists code %d (%s), which plexus does not have", code, row.name)
	}
}

func TestTableIsInOrderFromOneHundred(t *testing.T) {
	for i, c := range Table() {
		if c.Code != InvalidSelection+uint(i) {
			t.Errorf("Table()[%d] is code %d, want %d", i, c.Code, InvalidSelection+uint(i))
		}
	}
}
