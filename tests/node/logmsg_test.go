package node

import "testing"

// TestLogMsgReadsCRIOLines: the message of a CRI-O log line, quoted or
// not, with fields after it (log level debug) or not.
func TestLogMsgReadsCRIOLines(t *testing.T) {
	for _, c := range []struct{ name, line, want string }{
		{"info", `time="2026-11-25T22:16:24.5Z" level=info msg="Updated default CNI network name to plexus"`, "Updated default CNI network name to plexus"},
		{"debug fields after", `time="2026-11-25T22:16:24.5Z" level=info msg="Updated default CNI network name to plexus" file="ocicni/ocicni.go:382"`, "Updated default CNI network name to plexus"},
		{"escaped quotes", `time="x" level=info msg="Adding pod bench_a to CNI network \"plexus\" (type=plexus-shim)" file="ocicni/ocicni.go:592" id=1`, `Adding pod bench_a to CNI network "plexus" (type=plexus-shim)`},
		{"unquoted", `time="x" level=info msg=ready file="a.go:1"`, "ready"},
		{"none", `time="x" level=info`, ""},
		{"cut short", `time="x" level=info msg="Found CNI network plexus (type=`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := logMsg(c.line); got != c.want {
				t.Errorf("logMsg(%s) = %q, want %q", c.line, got, c.want)
			}
		})
	}
}
