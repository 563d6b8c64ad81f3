package node

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

// proc is one node daemon (containerd, kubelet), in its own process group,
// its output appended to a log file that survives restarts.
type proc struct {
	name    string
	bin     string
	args    []string
	logPath string
	env     []string // added to the test's environment
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // valid after exited is closed
}

// stopGrace is how long a daemon gets to exit after SIGTERM.
const stopGrace = 15 * time.Second

func newProc(name, bin, logPath string, args ...string) *proc {
	return &proc{name: name, bin: bin, args: args, logPath: logPath}
}

// start runs the daemon. It dies with the test binary even if stop never
// runs (Pdeathsig), which follows the forking OS thread: the goroutine
// holds that thread until the daemon exits.
func (p *proc) start() error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	defer log.Close() // the child has its own copy
	fmt.Fprintf(log, "=== %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	started := make(chan error)
	go func() {
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
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.exited = cmd, exited
	return nil
}

// running reports whether the daemon was started and has not exited.
func (p *proc) running() bool {
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

// stop sends SIGTERM, waits for the exit (SIGKILL after stopGrace), then
// kills whatever is left in the daemon's process group. Processes that
// left the group (containerd's shims) are not touched. Safe to call when
// not running.
func (p *proc) stop() error {
	if p == nil || p.cmd == nil {
		return nil
	}
	pgid := p.cmd.Process.Pid // == pgid, thanks to Setpgid
	if p.running() {
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s process group %d: %w", p.name, pgid, err)
	}
	return nil
}

// exitError says how the daemon ended, for messages when it died early.
func (p *proc) exitError() error {
	if p.running() || p.exited == nil {
		return nil
	}
	return fmt.Errorf("%s exited: %v", p.name, p.waitErr)
}

// logTail is the last n lines of the daemon's log.
func (p *proc) logTail(n int) string { return tailFile(p.logPath, n) }

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
