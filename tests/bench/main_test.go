// Package bench measures whole pod lifecycles: plexus in thin mode against
// the floor, the same delegates run through libcni in one process with no
// meta-plugin. Numbers go to docs/performance.md.
package bench

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
