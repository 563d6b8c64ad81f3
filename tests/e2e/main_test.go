// Package e2e drives plexus against a real kube-apiserver: cnitool as the
// runtime, reference plugins in network namespaces, pods and NADs created
// through the API, and plexus authenticated as the deploy/ ServiceAccount
// with exactly the RBAC of deploy/base/rbac.yaml.
package e2e

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
