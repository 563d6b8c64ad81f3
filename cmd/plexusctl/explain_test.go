package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
)

// explain pod's exit codes: 64 for usage, 0 for a pod that would get its
// networks, 1 for one that would not; -o json is the report.
func TestExplainExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("KUBECONFIG", "")
	pod := write("pod.yaml", "kind: Pod\nmetadata:\n  name: web\n  annotations:\n    k8s.v1.cni.cncf.io/networks: blue\n")
	nad := write("nad.yaml", "kind: NetworkAttachmentDefinition\nmetadata:\n  name: blue\nspec:\n  config: '{\"cniVersion\":\"1.0.0\",\"type\":\"bridge\"}'\n")
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"explain"}, codes.ExitUsage},
		{[]string{"explain", "node"}, codes.ExitUsage},
		{[]string{"explain", "pod"}, codes.ExitUsage},
		{[]string{"explain", "pod", "a/b", "-f", pod}, codes.ExitUsage},
		{[]string{"explain", "pod", "-f", pod, "-o", "yaml"}, codes.ExitUsage},
		{[]string{"explain", "pod", "-f", pod, "--nad", nad}, codes.ExitOK},
		{[]string{"explain", "pod", "-f", pod}, codes.ExitFail},
	} {
		if got, stdout, stderr := runCtl(t, tt.args...); got != tt.want {
			t.Errorf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, got, tt.want, stdout, stderr)
		}
	}
	code, stdout, stderr := runCtl(t, "explain", "pod", "-f", pod, "-o", "json")
	if code != codes.ExitFail {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		OK       bool     `json:"ok"`
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.OK || !strings.Contains(strings.Join(rep.Problems, "\n"), "not found") {
		t.Errorf("json report %s (err %v)", stdout, err)
	}
}
