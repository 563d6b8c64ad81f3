//go:build !unix

package extensions

// lockFile is a no-op where flock is missing; concurrent first compiles
// then only cost duplicate work (wazero writes cache entries atomically).
func lockFile(string, string) (func(), error) { return func() {}, nil }
