package netns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestLogLinesHaveOneKeyPerMeaning: every line plexus logs at debug level
// through ADD, a repeated ADD, DEL, a repeated DEL without a netns, a DEL
// from libcni's cache and GC's DEL of a stale container names each key once (the runtime's interface
// is "ifName", an attachment's "interface").
func TestLogLinesHaveOneKeyPerMeaning(t *testing.T) {
	h := harness.New(t)
	c, before := h.BridgePod("demo", "web", "net-a", "net-b")
	for _, cmd := range []string{"ADD", "ADD", "DEL"} {
		if _, e := h.Plugin(c, cmd); e != nil {
			t.Fatalf("%s: %+v", cmd, e)
		}
	}
	if _, e := h.PluginEdited(c, "DEL", []string{"CNI_NETNS="}, nil); e != nil {
		t.Fatalf("repeated DEL: %+v", e)
	}
	if _, e := h.Plugin(c, "ADD"); e != nil {
		t.Fatalf("ADD: %+v", e)
	}
	harness.Must(t, os.WriteFile(filepath.Join(h.CacheDir, "records", "direct-web.json"), []byte("{"), 0o600))
	if _, e := h.Plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL with a torn record: %+v", e)
	}
	if _, e := h.Plugin(c, "ADD"); e != nil {
		t.Fatalf("ADD: %+v", e)
	}
	// GC detaches the container, which the runtime no longer lists.
	h.PluginStdin(t, "GC", `{"cniVersion":"1.1.0","cni.dev/valid-attachments":[]}`)
	h.AssertNoLeaks(before)

	log, err := os.ReadFile(filepath.Join(h.Dir, "plexus.log"))
	harness.Must(t, err)
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	var delegateLines, gcLines int
	for _, line := range lines {
		keys, err := logKeys(line)
		if err != nil {
			t.Errorf("unparsable log line %q: %v", line, err)
			continue
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("key %q appears twice in %q", k, line)
			}
			seen[k] = true
		}
		if strings.Contains(line, "cmd=GC") && strings.Contains(line, `msg="delegate DEL"`) {
			gcLines++
			if !strings.Contains(line, "container=direct-web") {
				t.Errorf("GC's DEL of a stale container does not name it: %q", line)
			}
		}
		if strings.Contains(line, `msg="delegate ADD"`) {
			delegateLines++
			if !seen["ifName"] || !seen["interface"] {
				t.Errorf("delegate line without the runtime's ifName and the attachment's interface: %q", line)
			}
		}
	}
	if gcLines == 0 {
		t.Errorf("no delegate DEL line from GC in:\n%s", log)
	}
	if delegateLines == 0 {
		t.Errorf("no delegate ADD line at debug level in:\n%s", log)
	}
}

// logKeys lists the keys of a slog text line (key=value, values quoted
// when they contain spaces, quotes or '=').
func logKeys(line string) ([]string, error) {
	var keys []string
	for rest := line; rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return nil, errNoKey(rest)
		}
		keys = append(keys, rest[:eq])
		rest = rest[eq+1:]
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(rest) {
				return nil, errNoKey(rest)
			}
			rest = rest[end+1:]
			continue
		}
		if sp := strings.IndexByte(rest, ' '); sp >= 0 {
			rest = rest[sp:]
		} else {
			rest = ""
		}
	}
	return keys, nil
}

type errNoKey string

func (e errNoKey) Error() string { return "no key=value at " + string(e) }
