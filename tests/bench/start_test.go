package bench

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkPluginStart: exec to exit of the plexus plugin answering
// VERSION, which reads no config: what every thin-mode CNI call pays before
// plexus does any work (the runtime's start of a static binary and Go
// package initialization of everything it links: the core pipeline,
// client-go, OPA and wazero). minflt/op is the child's minor page faults,
// which a smaller or differently laid-out binary would change even when
// the timing noise hides it.
func BenchmarkPluginStart(b *testing.B) {
	b.Run("plexus", func(b *testing.B) { benchStart(b, filepath.Join(harness.BinDir, "plexus")) })
}

func benchStart(b *testing.B, bin string) {
	var faults int64
	for b.Loop() {
		cmd := exec.Command(bin)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), `"supportedVersions"`) {
			b.Fatalf("%s VERSION: %v: %s", bin, err, out)
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			faults += ru.Minflt
		}
	}
	b.ReportMetric(float64(faults)/float64(b.N), "minflt/op")
}
