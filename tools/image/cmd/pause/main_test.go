package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is also pause: run with PAUSE_TEST_MAIN=1 it runs run,
// and says "ready" on stdout once the signals are caught.
func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], func() { fmt.Println("ready") }))
	}
	os.Exit(m.Run())
}

// startPause starts pause with args; with wantReady, it returns once pause
// catches its signals.
func startPause(t *testing.T, wantReady bool, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PAUSE_TEST_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if wantReady {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("pause said %q (%v), want ready", line, err)
		}
	}
	return cmd
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() {
		t.Fatalf("pause died of %v instead of exiting", ws.Signal())
	}
	return ee.ExitCode()
}

func TestStopSignalsExitZero(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startPause(t, true)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := exitCode(t, cmd.Wait()); code != 0 {
				t.Errorf("exit code %d after %v, want 0", code, sig)
			}
		})
	}
}

func TestArgumentsAreAUsageError(t *testing.T) {
	cmd := startPause(t, false, "extra")
	if code := exitCode(t, cmd.Wait()); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
}

// procState is the state letter of /proc/<pid>/stat ("" once pid is gone).
func procState(t *testing.T, pid int) string {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	// The state follows the command name's closing parenthesis.
	s := string(stat)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func TestReapCollectsExitedChildren(t *testing.T) {
	var pids []int
	for range 3 {
		cmd := exec.Command("/bin/true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	for _, pid := range pids {
		deadline := time.Now().Add(30 * time.Second)
		for procState(t, pid) != "Z" {
			if time.Now().After(deadline) {
				t.Fatalf("child %d never became a zombie (state %q)", pid, procState(t, pid))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	reap()
	for _, pid := range pids {
		if st := procState(t, pid); st != "" {
			t.Errorf("child %d still there (state %q) after reap", pid, st)
		}
	}
}
