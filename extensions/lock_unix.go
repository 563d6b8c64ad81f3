//go:build unix

package extensions

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes an exclusive flock on a lock file in the cache dir named
// after the module's path, and returns its release. The kernel drops the
// lock if the process dies, so a crashed compile never wedges the cache.
// Hashing the path, not the module, spares every cold load a second hash
// of its bytes; two paths to one module at worst compile it twice.
func lockFile(dir, modulePath string) (func(), error) {
	sum := sha256.Sum256([]byte(modulePath))
	path := filepath.Join(dir, "plexus-"+hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("compile lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("compile lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
