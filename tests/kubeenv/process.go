package kubeenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Process is a program a test runs in its own process group (the control
// plane here, a node's daemons in tests/node), its output in a log file.
// A Process may be started again after Stop; its log starts empty at its
// first start and keeps every later one, each marked by a header line.
type Process struct {
	Name    string
	Bin     string
	Args    []string
	Env     []string // added to the test's environment
	LogPath string

	cmd     *exec.Cmd
	started bool          // Start has run once: later starts append to the log
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // valid after exited is closed
}

// NewProcess is a Process not yet started.
func NewProcess(name, bin, logPath string, args ...string) *Process {
	return &Process{Name: name, Bin: bin, Args: args, LogPath: logPath}
}

// Start runs the program. It dies with the test binary even if Stop never
// runs (a panic, a killed `go test`): Pdeathsig, which follows the OS
// thread that forked.
func (p *Process) Start() error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !p.started {
		flags |= os.O_TRUNC
	}
	log, err := os.OpenFile(p.LogPath, flags, 0o600)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.Name, err)
	}
	defer log.Close() // the child has its own copy
	p.started = true
	fmt.Fprintf(log, "=== %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), p.Env...)
	// Its own group, so Stop can kill anything it spawned too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	started := make(chan error)
	go func() {
		// Pdeathsig fires when the forking thread exits, and a goroutine
		// that locks its thread and returns without unlocking ends it (the
		// netns tests' testutils.NewNS does). Holding the thread until the
		// process exits keeps anyone else off it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			return
		}
		p.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.cmd, p.exited = cmd, exited
	return nil
}

// Running reports whether the program was started and has not exited.
func (p *Process) Running() bool {
	if p == nil || p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Pid is the running program's process ID, 0 when it is not running.
func (p *Process) Pid() int {
	if !p.Running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop sends SIGTERM to the program, waits for its exit (SIGKILL to its
// group after grace), then kills whatever is left in its process group.
// SIGTERM goes to the program alone: its children still in the group (a
// CNI plugin containerd is running) are not asked to stop half-way.
// Processes that left the group (containerd's shims) are not touched.
// Safe to call when not running.
func (p *Process) Stop(grace time.Duration) error {
	if p == nil || p.cmd == nil {
		return nil
	}
	pgid := p.cmd.Process.Pid // == pgid, thanks to Setpgid
	if p.Running() {
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
	}
	// ESRCH (group already empty) is the expected case.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s process group %d: %w", p.Name, pgid, err)
	}
	return nil
}

// ExitError says how the program ended, for messages when it died early;
// nil while it runs or before it started.
func (p *Process) ExitError() error {
	if p.Running() || p.exited == nil {
		return nil
	}
	return fmt.Errorf("%s exited: %v", p.Name, p.waitErr)
}

// LogTail is the last n lines of the program's log.
func (p *Process) LogTail(n int) string { return Tail(p.LogPath, n) }

// Tail returns the last n lines of a file, or a note saying why it could not.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
