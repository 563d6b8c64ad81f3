//go:build !amd64 && !arm64

package main

import "golang.org/x/sys/unix"

// sysMemfdCreate is memfd_create(2).
const sysMemfdCreate = unix.SYS_MEMFD_CREATE
