package netns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs make demo's script on make build's output: the baseline
// refuses the intruder naming its rule, the overrides extension sets the
// first selection's MTU, the enricher adds gateways to network-status,
// explain accounts for the demo pod, and nothing is left.
func TestDemo(t *testing.T) {
	bin := os.Getenv("PLEXUS_BIN")
	if bin == "" {
		if os.Getenv("PLEXUS_E2E") == "1" {
			t.Fatal("PLEXUS_BIN is not set: the demo runs make build's binaries")
		}
		t.Skip("PLEXUS_BIN is not set: run make build and point PLEXUS_BIN at bin/")
	}
	work := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("sh", "../../deploy/demo/run.sh")
	cmd.Env = append(os.Environ(), "BIN="+bin, "WORK="+work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"denied by policy [namespace-isolation]: pod demo/intruder may not use network infra/green",
		"net1@if", "mtu 1400",
		`"io.plexus.status.gateways"`,
		`[0] io.plexus.overrides: module "overrides"`,
		"Result: ok, the pod would get every network it asks for",
		"interfaces left in the namespace: 0",
		"leases left: 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, text)
		}
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("the demo left %s behind: %v", work, err)
	}
}
