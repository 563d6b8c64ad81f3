package config

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// docFile holds the table of the config's keys, under "## Keys".
const docFile = "docs/configuration.md"

// docKeys reads the keys of docFile's table: the first cell of each row,
// one or more backticked keys separated by commas.
func docKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../" + docFile)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Keys\n")
	if !ok {
		t.Fatalf(`%s has no "## Keys" section`, docFile)
	}
	section, _, _ = strings.Cut(section, "\n#")
	var keys []string
	for line := range strings.SplitSeq(section, "\n") {
		cell, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		if !strings.HasPrefix(line, "| `") || !ok {
			continue
		}
		for k := range strings.SplitSeq(cell, ", ") {
			keys = append(keys, strings.Trim(k, "`"))
		}
	}
	return keys
}

// docFile's table lists every key plexus defines, and no other key than
// those and the CNI keys plexus reads (capabilities, runtimeConfig).
func TestDocListsEveryKey(t *testing.T) {
	keys := docKeys(t)
	for _, k := range plexusKeys {
		if !slices.Contains(keys, k) {
			t.Errorf("%s does not list the key %q", docFile, k)
		}
	}
	for _, k := range keys {
		if !slices.Contains(plexusKeys, k) && k != "capabilities" && k != "runtimeConfig" {
			t.Errorf("%s lists the key %q, which the config does not have", docFile, k)
		}
	}
}
