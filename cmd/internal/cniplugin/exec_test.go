package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestDelegateRunsAreLoggedAtDebug: at debug level each delegate run is
// one line naming the plugin, the call and its wall and CPU time; at info
// level nothing is logged.
func TestDelegateRunsAreLoggedAtDebug(t *testing.T) {
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=net1", "CNI_COMMAND=DEL"}
	for _, tc := range []struct {
		name  string
		level slog.Level
		lines int
	}{
		{"debug", slog.LevelDebug, 1},
		{"info", slog.LevelInfo, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := &delegateExec{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level}))}
			if _, err := e.ExecPlugin(context.Background(), "/bin/true", nil, env); err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
			if buf.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.lines {
				t.Fatalf("logged %d lines, want %d:\n%s", len(lines), tc.lines, buf.Bytes())
			}
			if tc.lines == 0 {
				return
			}
			var got struct {
				Msg, Plugin, Operation, Container, Interface string
				Wall, User, Sys                              int64
				ExitCode                                     int
			}
			if err := json.Unmarshal(lines[0], &got); err != nil {
				t.Fatal(err)
			}
			// The operation is the last CNI_COMMAND, the one exec passes.
			if got.Msg != "delegate ran" || got.Plugin != "true" || got.Operation != "DEL" || got.Container != "c1" || got.Interface != "net1" || got.Wall <= 0 || got.User < 0 || got.Sys < 0 {
				t.Errorf("logged %s", lines[0])
			}
		})
	}
}
