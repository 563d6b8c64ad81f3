// Package faults injects faults into plexus run as a container runtime
// runs it (direct exec or cnitool, reference plugins, real network
// namespaces): misbehaving delegates, a killed plexus, broken records, a
// full disk, repeated and out-of-order calls, a vanishing API server. After
// every fault the ADD must fail with a CNI error naming what failed, and
// nothing may stay behind (s7.2): no interface, lease, record, lock or
// process.
package faults

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// badPlugin is the fault-injection delegate, built into harness.BinDir.
const badPlugin = "github.com/plexus-cni/plexus/tests/faults/testdata/badplugin"

func TestMain(m *testing.M) { os.Exit(harness.MainBuilding(m, badPlugin)) }
