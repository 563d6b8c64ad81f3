package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/sdk/abi"
	"github.com/plexus-cni/plexus/sdk/wasmfmt"
)

// buildVlan builds the example vlan extension as mk/ext.mk does (a
// wasip1 reactor, its manifest appended); PLEXUS_EXT_WASM_DIR names
// modules built by "make ext-examples" instead.
func buildVlan(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("PLEXUS_EXT_WASM_DIR"); dir != "" {
		return filepath.Join(dir, "vlan.wasm")
	}
	out := filepath.Join(t.TempDir(), "vlan.wasm")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-buildmode=c-shared", "-o", out, "./vlan")
	cmd.Dir = "../../extensions/examples"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the vlan example: %v\n%s", err, b)
	}
	manifest, err := os.ReadFile("../../extensions/examples/vlan/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, wasmfmt.AppendCustomSection(wasm, abi.ManifestSection, manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// The ext commands on a real module: flags before or after the module,
// the input from a file or stdin, exit 1 when the hook fails.
func TestExtCommands(t *testing.T) {
	vlan := buildVlan(t)
	dir := t.TempDir()
	input := `{"pod":{"namespace":"ns","name":"p"},"network":{"namespace":"ns","name":"net","statusName":"ns/net"},
	  "ifName":"net1","config":{"cniVersion":"1.0.0","name":"net","type":"bridge","bridge":"br0"},"keys":{"com.example.vlan":42}}`
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(input, "42", "0", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("inspect", func(t *testing.T) {
		code, stdout, stderr := runCtl(t, "ext", "inspect", vlan)
		var d struct{ Name string }
		if code != codes.ExitOK || json.Unmarshal([]byte(stdout), &d) != nil || d.Name != "vlan" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"run, flags after the module", []string{"ext", "run", vlan, "--hook", "prepare", "--input", good}, "", codes.ExitOK, `"vlan": 42`},
		{"run, flags around the module", []string{"ext", "run", "--hook", "prepare", vlan, "--input", good}, "", codes.ExitOK, `"vlan": 42`},
		{"run, input from stdin", []string{"ext", "run", vlan, "--hook=prepare", "--input=-"}, input, codes.ExitOK, `"vlan": 42`},
		{"run, the hook refuses", []string{"ext", "run", "--hook", "prepare", vlan, "--input", bad}, "", codes.ExitFail, "between 1 and 4094, got 0"},
		{"warm", []string{"ext", "warm", filepath.Join(dir, "cache"), vlan}, "", codes.ExitOK, "compiled 1 module(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRootCmd("plexusctl", &strings.Builder{}, &strings.Builder{})
			var stdout, stderr strings.Builder
			root.SetOut(&stdout)
			root.SetErr(&stderr)
			root.SetIn(strings.NewReader(tc.stdin))
			code := execute(t.Context(), root, tc.args)
			if code != tc.code || !strings.Contains(stdout.String(), tc.want) && !strings.Contains(stdout.String(), strings.ReplaceAll(tc.want, " ", "")) {
				t.Fatalf("exit %d, want %d and %q\nstdout %s\nstderr %s", code, tc.code, tc.want, stdout.String(), stderr.String())
			}
		})
	}
}
