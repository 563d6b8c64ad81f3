package kubeenv

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// E2EEnv is the environment variable that makes end-to-end prerequisites
// mandatory: with PLEXUS_E2E=1 a missing binary fails the test instead of
// skipping it, so CI cannot pass by testing nothing.
const E2EEnv = "PLEXUS_E2E"

// ForTest starts an environment for t and stops it when t ends, failing t
// if Stop leaves anything behind. It skips t when the binaries are missing
// and PLEXUS_E2E is not "1".
func ForTest(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.BinDir == "" {
		d, err := DefaultBinDir()
		if err != nil {
			t.Fatal(err)
		}
		opts.BinDir = d
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		_, err := os.Stat(filepath.Join(opts.BinDir, b))
		if errors.Is(err, fs.ErrNotExist) && os.Getenv(E2EEnv) != "1" {
			t.Skipf("%s not found in %s: run `make k8s-bins` (set %s=1 to make this a failure)",
				b, opts.BinDir, E2EEnv)
		}
	}
	e, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return e
}
