package cniplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"
)

// delegateExec runs delegate plugins for libcni like its default does,
// except that every delegate dies with plexus: a runtime whose deadline
// passes SIGKILLs plexus alone, and a stuck delegate would hold its netns
// and lease forever. With root set (plexusd in a pod), a delegate runs
// chrooted to the host's root, with the host's tools and files, as under
// the runtime; the paths it is given are the host's.
type delegateExec struct {
	invoke.RawExec        // FindInPath without root
	version.PluginDecoder // Decode
	root                  string
	log                   *slog.Logger // at debug, a line per delegate run
}

// FindInPath finds plugin as the delegate will see it.
func (e *delegateExec) FindInPath(plugin string, paths []string) (string, error) {
	if e.root == "" {
		return e.RawExec.FindInPath(plugin, paths)
	}
	return findInRoot(e.root, plugin, paths)
}

// hostPATH is a chrooted delegate's PATH, as systemd gives services, not the image's.
const hostPATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// withHostPath is environ with PATH replaced by hostPATH.
func withHostPath(environ []string) []string {
	out := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	return append(out, hostPATH)
}

// findInRoot is invoke.FindInPath with every symlink resolved inside root.
func findInRoot(root, plugin string, paths []string) (string, error) {
	if plugin == "" || strings.ContainsRune(plugin, '/') {
		return "", fmt.Errorf("plugin name %q: want a file name", plugin)
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no paths provided")
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("delegate root %s: %w", root, err)
	}
	defer unix.Close(rootFd)
	for _, dir := range paths {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, plugin)
		if executableIn(rootFd, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s (under the delegate root %s)", plugin, paths, root)
}

// executableIn: p, resolved inside rootFd, is an executable regular file.
func executableIn(rootFd int, p string) bool {
	fd, err := unix.Openat2(rootFd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0
}

// CheckDelegateRoot tells whether delegates can run chrooted to root, holding binDirs.
func CheckDelegateRoot(root string, binDirs []string) error {
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		hint := "name the host's root directory"
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrNotExist) {
			hint = "run plexusd in the host's PID namespace (hostPID: true) and privileged, so that /proc/1/root is the host's /, or mount the host's / into the pod and name that directory"
		}
		return fmt.Errorf("delegate root %s: %w: %s", root, err, hint)
	}
	defer unix.Close(rootFd)
	for _, dir := range binDirs {
		fd, err := unix.Openat2(rootFd, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
		if err != nil {
			return fmt.Errorf("delegate root %s: the CNI bin dir %s: %w (is %s the host's /?)", root, dir, err, root)
		}
		unix.Close(fd)
	}
	return nil
}

// busyRetries covers a plugin binary being replaced while we exec it (ETXTBSY).
const busyRetries = 5

func (e *delegateExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	if e.root != "" {
		environ = withHostPath(environ)
	}
	for i := 0; ; i++ {
		out, err := runDelegate(ctx, e.root, path, stdin, environ, e.log)
		if i < busyRetries && errors.Is(err, syscall.ETXTBSY) {
			time.Sleep(time.Second)
			continue
		}
		return out, err
	}
}

func runDelegate(ctx context.Context, root, path string, stdin []byte, environ []string, log *slog.Logger) ([]byte, error) {
	dio, err := newDelegateIO(stdin)
	if err != nil {
		return nil, err
	}
	defer dio.close()
	c := exec.Command(path)
	c.Env = environ
	c.Stdin, c.Stdout, c.Stderr = dio.in, dio.out, dio.err
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if root != "" {
		// The child chroots before it execs path, so path is looked up in
		// the host's tree; "/" keeps it from starting in plexusd's.
		c.SysProcAttr.Chroot, c.Dir = root, "/"
	}
	// The parent-death signal follows the thread that forked, not the
	// process: keep this goroutine on its thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	if err := c.Start(); err != nil {
		return nil, delegateError(ctx, err, nil, nil)
	}
	// The call's end kills the delegate, as exec.CommandContext would,
	// without a goroutine that waits for it.
	stop := context.AfterFunc(ctx, func() { _ = c.Process.Kill() })
	awaitExit(c.Process.Pid)
	stop()
	err = c.Wait()
	logRun(ctx, log, c, time.Since(start))
	stdout, rerr := readOutput(dio.out)
	if err != nil {
		return nil, delegateError(ctx, err, stdout, tail(dio.err, stderrTail))
	}
	return stdout, rerr
}

// delegateIO are a delegate's stdin, stdout and stderr: memory files, not
// pipes, which need a goroutine to feed or drain them, each wakeup a
// context switch at the node's busiest moment; a file is read once the
// delegate has exited.
type delegateIO struct{ in, out, err *os.File }

func newDelegateIO(stdin []byte) (*delegateIO, error) {
	d := &delegateIO{}
	var err error
	for _, f := range []struct {
		name string
		to   **os.File
	}{{"delegate-stdin", &d.in}, {"delegate-stdout", &d.out}, {"delegate-stderr", &d.err}} {
		if *f.to, err = memFile(f.name); err != nil {
			d.close()
			return nil, err
		}
	}
	// The delegate reads from the offset it inherits: the start.
	if _, err := d.in.WriteAt(stdin, 0); err != nil {
		d.close()
		return nil, fmt.Errorf("writing the delegate's stdin: %w", err)
	}
	return d, nil
}

func (d *delegateIO) close() {
	for _, f := range []*os.File{d.in, d.out, d.err} {
		if f != nil {
			f.Close()
		}
	}
}

func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("creating the delegate's %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

const (
	stderrTail        = 2048     // of a failed delegate's stderr, quoted
	maxDelegateOutput = 16 << 20 // read of its stdout (a result is kilobytes)
)

// readOutput is what the delegate wrote to stdout.
func readOutput(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the delegate's output: %w", err)
	}
	if fi.Size() > maxDelegateOutput {
		return nil, fmt.Errorf("the delegate wrote %d bytes to stdout, over plexus's limit of %d", fi.Size(), maxDelegateOutput)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the delegate's output: %w", err)
	}
	return b, nil
}

// tail is the last n bytes written to f, "..." first when cut.
func tail(f *os.File, n int64) []byte {
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	k, _ := f.ReadAt(b, off)
	if off > 0 {
		return append([]byte("..."), b[:k]...)
	}
	return b[:k]
}

// logRun logs a delegate's wall time beside its CPU time: the gap is time it waited.
func logRun(ctx context.Context, log *slog.Logger, c *exec.Cmd, wall time.Duration) {
	if log == nil || c.ProcessState == nil || !log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	log.LogAttrs(ctx, slog.LevelDebug, "delegate ran",
		slog.String("plugin", filepath.Base(c.Path)),
		// The delegate's own CNI_COMMAND and CNI_IFNAME: "cmd" and
		// "ifName" are the runtime's call's (TestLogLinesHaveOneKeyPerMeaning).
		slog.String("operation", envValue(c.Env, "CNI_COMMAND")),
		slog.String("container", envValue(c.Env, "CNI_CONTAINERID")),
		slog.String("interface", envValue(c.Env, "CNI_IFNAME")),
		slog.Duration("wall", wall),
		slog.Duration("user", c.ProcessState.UserTime()),
		slog.Duration("sys", c.ProcessState.SystemTime()),
		slog.Int("exitCode", c.ProcessState.ExitCode()))
}

// envValue is name's last value in env, as exec would pass it.
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// awaitExit returns once the child pid has exited, without reaping it, or
// at once when that cannot be watched. It parks on Go's poller instead of
// Wait's blocking waitid, during which Go's system monitor keeps waking
// and takes CPU from the delegate on a small node.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// The pidfd turns readable on exit; poll until waitid (WNOWAIT) sees it.
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != unix.EINTR && (err != nil || info.Signo != 0)
	})
}

// delegateError prefers the plugin's CNI error, then why it was killed, then stderr.
func delegateError(ctx context.Context, err error, stdout, stderr []byte) error {
	var te types.Error
	if len(stdout) > 0 && json.Unmarshal(stdout, &te) == nil && te.Msg != "" {
		return &te
	}
	if ctx.Err() != nil {
		return fmt.Errorf("killed after %w (%v)", context.Cause(ctx), err)
	}
	msg := strings.TrimSpace(string(stderr))
	if msg == "" {
		return fmt.Errorf("plugin failed without an error message: %w", err)
	}
	return fmt.Errorf("plugin failed: %w: %s", err, msg)
}
