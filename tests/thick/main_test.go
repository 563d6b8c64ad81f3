// Package thick tests thick mode: cnitool -> the plexus shim -> plexusd ->
// the reference plugins, in network namespaces.
package thick

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// hostFile is a test delegate that reads a file a node agent wrote.
const hostFile = "github.com/plexus-cni/plexus/tests/thick/testdata/hostfile"

func TestMain(m *testing.M) { os.Exit(harness.MainBuilding(m, hostFile)) }
