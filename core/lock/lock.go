// Package lock serializes operations on one container across processes
// (s7.3): a file lock per container ID, different containers in parallel.
package lock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/plexus-cni/plexus/core/names"
)

// Locker hands out per-container locks under Dir.
type Locker struct {
	Dir string
}

// Unlock releases a lock; with remove set it also deletes the lock file.
type Unlock func(remove bool)

// Lock blocks until the container's lock is held or ctx ends.
func (l *Locker) Lock(ctx context.Context, containerID string) (Unlock, error) {
	if err := names.ContainerID(containerID); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating lock directory: %w", err)
	}
	path := filepath.Join(l.Dir, containerID+".lock")
	wait := time.Millisecond
	for {
		f, err := tryLock(path)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return func(remove bool) {
				if remove {
					_ = os.Remove(path)
				}
				f.Close() // closing drops the flock
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the lock of container %s: %w", containerID, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// tryLock returns the locked file, or nil when another holder has it or
// removed it after we opened it (locks on two inodes of one path).
func tryLock(path string) (*os.File, error) {
	// O_NOFOLLOW: a planted symlink must not make plexus lock a file elsewhere.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("lock file %s is a symbolic link: refusing to follow it", path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, nil
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	held, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	now, err := os.Lstat(path)
	if err != nil || !os.SameFile(held, now) {
		f.Close()
		return nil, nil
	}
	return f, nil
}
