package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/codes"
)

const library = "../../policies/library"

// runCtl runs the command line as plexusctl; it returns the exit status,
// stdout and stderr.
func runCtl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runAs(t, "plexusctl", args...)
}

// runAs runs the command line as the binary invokedAs (os.Args[0]).
func runAs(t *testing.T, invokedAs string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), newRootCmd(invokedAs, &stdout, &stderr), args)
	return code, stdout.String(), stderr.String()
}

func TestDispatcher(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "no arguments prints usage", args: nil, wantCode: codes.ExitUsage, wantErr: "policy"},
		{name: "unknown group is refused", args: []string{"nope"}, wantCode: codes.ExitUsage, wantErr: `plexusctl: unknown command "nope"`},
		{name: "policy without command prints its usage", args: []string{"policy"}, wantCode: codes.ExitUsage, wantErr: "plexusctl policy eval"},
		{name: "unknown policy command is refused", args: []string{"policy", "run"}, wantCode: codes.ExitUsage, wantErr: `plexusctl policy: unknown command "run"`},
		{name: "test without paths is refused", args: []string{"policy", "test"}, wantCode: codes.ExitUsage, wantErr: "at least one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCtl(t, tc.args...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestPolicyTestPassesOnLibraryWithCoverage(t *testing.T) {
	code, out, stderr := runCtl(t, "policy", "test", library, "--coverage")
	if code != codes.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, s := range []string{"PASS", "test_network_of_other_namespace_is_denied", "coverage: 100.00%"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPolicyTestFailsOnFailingTest(t *testing.T) {
	dir := writeDir(t, map[string]string{"x_test.rego": "package x_test\n\ntest_wrong if 1 == 2\n"})
	code, out, _ := runCtl(t, "policy", "test", dir)
	if code != codes.ExitFail || !strings.Contains(out, "test_wrong") || !strings.Contains(out, "FAIL") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

func TestPolicyTestFailsWithoutTests(t *testing.T) {
	dir := writeDir(t, map[string]string{"x.rego": "package x\n\ny := 1\n"})
	code, out, _ := runCtl(t, "policy", "test", dir)
	if code != codes.ExitFail || !strings.Contains(out, "no test cases") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

func TestPolicyCheck(t *testing.T) {
	good := writeDir(t, map[string]string{"ok.rego": "package ok\n\nx := 1\n"})
	forbidden := writeDir(t, map[string]string{"net.rego": "package bad\n\nx := http.send({\"method\": \"get\", \"url\": \"http://x\"})\n"})
	unused := writeDir(t, map[string]string{"strict.rego": "package s\n\nimport data.nothing\n\nx := 1\n"})
	tests := []struct {
		name     string
		dir      string
		wantCode int
		wantErr  string
	}{
		{name: "library compiles", dir: library, wantCode: codes.ExitOK},
		{name: "clean module compiles", dir: good, wantCode: codes.ExitOK},
		{name: "forbidden built-in is named with file and line", dir: forbidden, wantCode: codes.ExitFail, wantErr: "net.rego:3: built-in http.send is forbidden"},
		{name: "strict compile refuses unused import", dir: unused, wantCode: codes.ExitFail, wantErr: "strict.rego:3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCtl(t, "policy", "check", tc.dir)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestPolicyFmt(t *testing.T) {
	const messy = "package x\nimport rego.v1\ny:=1\n"
	dir := writeDir(t, map[string]string{"messy.rego": messy, "tidy.rego": "package t\n\nz := 2\n"})
	messyPath := filepath.Join(dir, "messy.rego")

	code, out, _ := runCtl(t, "policy", "fmt", "--check", dir)
	if code != codes.ExitFail || strings.TrimSpace(out) != messyPath {
		t.Fatalf("--check: exit %d, listed %q; want 1 and only %s", code, out, messyPath)
	}
	if b, _ := os.ReadFile(messyPath); string(b) != messy {
		t.Fatal("--check changed the file")
	}

	if code, _, stderr := runCtl(t, "policy", "fmt", dir); code != codes.ExitOK {
		t.Fatalf("fmt: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(messyPath); !strings.Contains(string(b), "y := 1") {
		t.Fatalf("not formatted:\n%s", b)
	}
	if code, out, _ := runCtl(t, "policy", "fmt", "--check", dir); code != codes.ExitOK || out != "" {
		t.Fatalf("after fmt, --check: exit %d, listed %q", code, out)
	}
}

type evalOutput struct {
	Input    map[string]any `json:"input"`
	Decision struct {
		Allowed bool `json:"allowed"`
		Reasons []struct {
			Code, Message string
		} `json:"reasons"`
	} `json:"decision"`
}

func TestPolicyEval(t *testing.T) {
	base := []string{"policy", "eval", "--pod", "testdata/pod.yaml", "--policy", library, "--data", "testdata/admin.yaml"}
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantCodes []string
		check     func(t *testing.T, in map[string]any)
	}{
		{
			name: "own namespace with address in range is allowed", args: []string{"--nad", "testdata/nad-blue.yaml"},
			wantCode: codes.ExitOK,
			check: func(t *testing.T, in map[string]any) {
				sel := in["selection"].(map[string]any)
				if sel["index"] != float64(0) || in["interface"] != "net1" {
					t.Errorf("selection %v, interface %v", sel, in["interface"])
				}
				if _, ok := in["namespace"].(map[string]any)["labels"]; ok {
					t.Error("namespace labels present without --namespace-labels")
				}
			},
		},
		{
			name: "other namespace is denied by isolation", args: []string{"--nad", "testdata/nad-team-b.yaml"},
			wantCode: codes.ExitDenied, wantCodes: []string{"namespace-isolation"},
			check: func(t *testing.T, in map[string]any) {
				if in["selection"].(map[string]any)["index"] != float64(1) || in["interface"] != "net2" {
					t.Errorf("second element not chosen: %v", in["selection"])
				}
			},
		},
		{
			name: "explicit selection outside the range is denied",
			args: []string{"--nad", "testdata/nad-blue.yaml", "--selection", `{"name":"blue","ips":["10.99.0.1"]}`,
				"--namespace-labels", "team=a, tier=gold"},
			wantCode: codes.ExitDenied, wantCodes: []string{"static-ip-range"},
			check: func(t *testing.T, in map[string]any) {
				labels := in["namespace"].(map[string]any)["labels"].(map[string]any)
				if labels["team"] != "a" || labels["tier"] != "gold" {
					t.Errorf("namespace labels %v", labels)
				}
			},
		},
		{
			name:     "another query changes the answer",
			args:     []string{"--nad", "testdata/nad-blue.yaml", "--query", `{"allowed": false, "reasons": [{"code": "q", "message": "custom"}]}`},
			wantCode: codes.ExitDenied, wantCodes: []string{"q"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCtl(t, append(append([]string{}, base...), tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.wantCode, stdout, stderr)
			}
			var out evalOutput
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, stdout)
			}
			var got []string
			for _, r := range out.Decision.Reasons {
				got = append(got, r.Code)
			}
			if strings.Join(got, ",") != strings.Join(tc.wantCodes, ",") {
				t.Fatalf("reason codes %v, want %v", got, tc.wantCodes)
			}
			if out.Input["version"] != "plexus.policy/v1" {
				t.Errorf("input version %v", out.Input["version"])
			}
			if tc.check != nil {
				tc.check(t, out.Input)
			}
		})
	}
}

func TestPolicyEvalRefusesBadUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "missing nad", args: []string{"--pod", "testdata/pod.yaml", "--policy", library}, wantCode: codes.ExitUsage, wantErr: "--nad"},
		{name: "missing policy", args: []string{"--pod", "testdata/pod.yaml", "--nad", "testdata/nad-blue.yaml"}, wantCode: codes.ExitUsage, wantErr: "--policy"},
		{name: "bad namespace labels", args: []string{"--namespace-labels", "novalue"}, wantCode: codes.ExitUsage, wantErr: "key=value"},
		{
			name:     "selection naming another network",
			args:     []string{"--pod", "testdata/pod.yaml", "--nad", "testdata/nad-blue.yaml", "--policy", library, "--selection", `{"name":"red"}`},
			wantCode: codes.ExitFail, wantErr: "team-a/red",
		},
		{
			name:     "pod manifest that is not a pod",
			args:     []string{"--pod", "testdata/nad-blue.yaml", "--nad", "testdata/nad-blue.yaml", "--policy", library},
			wantCode: codes.ExitFail, wantErr: "not Pod",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCtl(t, append([]string{"policy", "eval"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.wantCode, tc.wantErr)
			}
		})
	}
}
