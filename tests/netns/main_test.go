package netns

import (
	"os"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
