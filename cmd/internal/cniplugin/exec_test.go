package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// script writes an executable shell script into a fresh directory.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "delegate")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDelegateOutputIsReadInFull: stdin reaches the delegate whole, and
// what it writes, beyond a pipe's buffer too, is the result; a failure
// quotes the end of its stderr; stdout past the limit is refused.
func TestDelegateOutputIsReadInFull(t *testing.T) {
	stdin := bytes.Repeat([]byte("c"), 200<<10)
	for _, tc := range []struct {
		name, body string
		wantLen    int
		wantErr    []string
	}{
		{"stdin echoed, past a pipe's buffer", "cat\n", len(stdin), nil},
		{"stderr's end quoted", "cat >/dev/null; head -c 5000 /dev/zero | tr '\\0' a >&2; echo THE-END >&2; exit 3\n", 0,
			[]string{"plugin failed: exit status 3: ...", "aTHE-END"}},
		{"stdout over the limit", "cat >/dev/null; head -c 16777217 /dev/zero\n", 0,
			[]string{"wrote 16777217 bytes to stdout, over plexus's limit of 16777216"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := (&delegateExec{}).ExecPlugin(context.Background(), script(t, tc.body), stdin, nil)
			if tc.wantErr == nil {
				if err != nil || len(out) != tc.wantLen || !bytes.Equal(out, stdin) {
					t.Fatalf("got %d bytes, %v; want %d bytes, the stdin", len(out), err, tc.wantLen)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %d bytes and no error", len(out))
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if len(err.Error()) > 2200 {
				t.Errorf("error is %d bytes long: the stderr quote is not bounded", len(err.Error()))
			}
		})
	}
}

// TestDelegateBackgroundChildDoesNotHoldTheCall: a delegate that leaves a
// process behind holding its stdout and stderr (a daemon it starts) is
// done when it exits, not when that process closes them.
func TestDelegateBackgroundChildDoesNotHoldTheCall(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The background child blocks until the test opens the fifo, after the
	// call has returned.
	bin := script(t, "cat "+fifo+" >/dev/null &\necho '{\"cniVersion\":\"1.0.0\"}'\n")
	done := make(chan error, 1)
	go func() {
		out, err := (&delegateExec{}).ExecPlugin(context.Background(), bin, nil, nil)
		if err == nil && !bytes.Contains(out, []byte("cniVersion")) {
			err = fmt.Errorf("output %q", out)
		}
		done <- err
	}()
	var err error
	returned := true
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		returned = false
	}
	// Release the background child: opening a fifo for writing blocks
	// until it reads.
	w, werr := os.OpenFile(fifo, os.O_WRONLY, 0)
	if werr != nil {
		t.Fatal(werr)
	}
	w.Close()
	if !returned {
		err = <-done
		t.Fatalf("the call waited for the delegate's background child (then %v)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}
