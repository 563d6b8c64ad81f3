package main

import (
	"syscall"
	"unsafe"
)

// fullPlugin is the plexus plugin's file name; it is installed beside the
// shim.
const fullPlugin = "plexus"

// becomeFullPlugin replaces this process with the full plexus plugin, for
// a DEL while plexusd is unreachable: it gets the same environment and the
// same config on stdin (from a memory file, since this process read the
// runtime's), so its output and exit status are the answer. It returns
// only when that cannot be done.
func becomeFullPlugin(stdin []byte) error {
	self, err := readlink("/proc/self/exe")
	if err != nil {
		return err
	}
	path := dir(self) + fullPlugin
	fd, err := memfd(stdin)
	if err != nil {
		return err
	}
	if err := syscall.Dup3(fd, 0, 0); err != nil {
		return err
	}
	syscall.Close(fd)
	return syscall.Exec(path, []string{path}, syscall.Environ())
}

// memfd is an anonymous file holding b, positioned at its start.
func memfd(b []byte) (int, error) {
	name := []byte("plexus-stdin\x00")
	r, _, errno := syscall.Syscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	fd := int(r)
	for rest := b; len(rest) > 0; {
		n, err := syscall.Write(fd, rest)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(fd)
			return -1, err
		}
		rest = rest[n:]
	}
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

func readlink(path string) (string, error) {
	buf := make([]byte, 4096)
	n, err := syscall.Readlink(path, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// dir is the directory part of an absolute path, with its slash.
func dir(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i+1]
		}
	}
	return "./"
}
