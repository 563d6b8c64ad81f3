package cniplugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

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
