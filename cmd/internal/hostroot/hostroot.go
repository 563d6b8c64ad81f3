// Package hostroot opens the node's files, sockets and network namespaces
// through the host's root directory as a pod sees it (/proc/1/root with
// hostPID), every symlink resolved inside it (the host's /var/run -> /run
// is the host's /run). Mounts made on the host after the pod started are
// reached without mount propagation. An empty root is this process's own.
package hostroot

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Open opens the host path p read-only (flags adds O_PATH or O_DIRECTORY)
// inside root. The error wraps os.ErrNotExist when p does not exist.
func Open(root, p string, flags int) (*os.File, error) {
	if !filepath.IsAbs(p) {
		return nil, fmt.Errorf("host path %q: want an absolute path", p)
	}
	// /proc/PID/ns/net is a magic link, which openat2 does not follow
	// inside a root; with hostPID, this process's /proc is the host's.
	if root == "" || p == "/proc" || strings.HasPrefix(p, "/proc/") {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: p, Err: err}
		}
		return os.NewFile(uintptr(fd), p), nil
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open host root", Path: root, Err: err}
	}
	defer unix.Close(rootFd)
	fd, err := unix.Openat2(rootFd, p, &unix.OpenHow{Flags: uint64(unix.O_RDONLY | unix.O_CLOEXEC | flags), Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p + " (under " + root + ")", Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// Exists reports whether the host path p exists inside root.
func Exists(root, p string) (bool, error) {
	f, err := Open(root, p, unix.O_PATH)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	return true, f.Close()
}

// DialUnix connects to the unix socket at host path p inside root,
// through /proc/self/fd of an O_PATH descriptor (which also lifts the
// 108-byte limit of a socket address).
func DialUnix(ctx context.Context, root, p string) (net.Conn, error) {
	var d net.Dialer
	if root == "" {
		return d.DialContext(ctx, "unix", p)
	}
	f, err := Open(root, p, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	conn, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(f.Fd())))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s under %s: %w", p, root, err)
	}
	return conn, nil
}
