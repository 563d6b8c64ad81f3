// Package thick tests thick mode: cnitool -> the plexus shim -> plexusd ->
// the reference plugins, in network namespaces.
package thick

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
