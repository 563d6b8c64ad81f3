package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/core/codes"
)

// commandPaths lists every command of the tree but cobra's hidden ones,
// as the words that run it.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if sub.Hidden {
			continue
		}
		path := append(append([]string{}, prefix...), sub.Name())
		out = append(out, path)
		out = append(out, commandPaths(sub, path)...)
	}
	return out
}

func TestHelpWorksForEveryCommand(t *testing.T) {
	root := newRootCmd("plexusctl", &bytes.Buffer{}, &bytes.Buffer{})
	// cobra adds completion and help at execution; run once to have them.
	execute(t.Context(), root, []string{"version"})
	paths := commandPaths(root, nil)
	if len(paths) < 20 {
		t.Fatalf("found %d commands: %v", len(paths), paths)
	}
	for _, p := range append(paths, []string{}) {
		for _, flag := range []string{"-h", "--help"} {
			args := append(append([]string{}, p...), flag)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runCtl(t, args...)
				want := "plexusctl " + strings.Join(p, " ")
				if code != codes.ExitOK || !strings.Contains(stdout, "Usage:\n  "+strings.TrimSpace(want)) || stderr != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and usage of %q", code, stdout, stderr, want)
				}
			})
		}
	}
}

func TestHelpAtEveryLevel(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in stdout: the usage line of the command helped
	}{
		{"root -h", []string{"-h"}, "plexusctl [command]"},
		{"root --help", []string{"--help"}, "plexusctl [command]"},
		{"help alone is the root's", []string{"help"}, "plexusctl [command]"},
		{"group -h lists its commands", []string{"policy", "-h"}, "plexusctl policy [command]"},
		{"group --help", []string{"ext", "--help"}, "plexusctl ext [command]"},
		{"command --help", []string{"policy", "push", "--help"}, "plexusctl policy push DIR [flags]"},
		{"help with a group", []string{"help", "explain"}, "plexusctl explain [command]"},
		{"help with a command", []string{"help", "explain", "pod"}, "plexusctl explain pod (NAMESPACE/NAME | -f POD.yaml) [flags]"},
		{"help wins over missing arguments", []string{"policy", "test", "-h"}, "plexusctl policy test PATHS... [flags]"},
		{"help wins over other flags", []string{"explain", "pod", "-o", "yaml", "--help"}, "plexusctl explain pod"},
		{"global flags before the command", []string{"--kubeconfig", "/nonexistent", "migrate", "-h"}, "plexusctl migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCtl(t, tc.args...)
			if code != codes.ExitOK || !strings.Contains(stdout, "Usage:\n  "+tc.want) || stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and usage %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

func TestGroupHelpListsItsCommands(t *testing.T) {
	_, stdout, _ := runCtl(t, "policy", "-h")
	for _, c := range []string{"test", "check", "fmt", "eval", "baseline", "push", "status"} {
		if !strings.Contains(stdout, "\n  "+c+" ") {
			t.Errorf("policy -h does not list %s:\n%s", c, stdout)
		}
	}
	_, stdout, _ = runCtl(t, "ext", "-h")
	for _, c := range []string{"inspect", "run", "warm", "pack"} {
		if !strings.Contains(stdout, "\n  "+c+" ") {
			t.Errorf("ext -h does not list %s:\n%s", c, stdout)
		}
	}
}

func TestBadCommandLinesAreUsageErrorsNamingTheToken(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "multus.conf")
	if err := os.WriteFile(from, []byte(`{"type":"multus","name":"m","clusterNetwork":"/x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"unknown command", []string{"nope"}, `plexusctl: unknown command "nope"`},
		{"misspelt command gets a suggestion", []string{"polcy"}, `unknown command "polcy"; did you mean policy?`},
		{"unknown policy command", []string{"policy", "nope"}, `plexusctl policy: unknown command "nope"`},
		{"unknown ext command", []string{"ext", "frobnicate"}, `plexusctl ext: unknown command "frobnicate"`},
		{"unknown explain kind", []string{"explain", "node"}, `plexusctl explain: unknown command "node"`},
		{"unknown help topic", []string{"help", "nope"}, `unknown help topic "nope"`},
		{"unknown nested help topic", []string{"help", "policy", "nope"}, `unknown help topic "policy nope"`},
		{"unknown flag", []string{"policy", "test", "--nope", "x"}, "unknown flag: --nope"},
		{"unknown shorthand", []string{"ext", "pack", "-z"}, "unknown shorthand flag: 'z' in -z"},
		{"single-dash long flag", []string{"policy", "status", "-kubeconfig", "x"}, "unknown shorthand flag: 'k' in -kubeconfig"},
		{"flag without its value", []string{"policy", "push", "dir", "--name"}, "flag needs an argument: --name"},
		{"bad flag value", []string{"ext", "run", "m.wasm", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{"stray argument to version", []string{"version", "extra"}, `plexusctl version: unexpected argument "extra"`},
		{"stray argument to policy status", []string{"policy", "status", "extra"}, `unexpected argument "extra"`},
		{"stray argument to policy baseline", []string{"policy", "baseline", "extra"}, `unexpected argument "extra"`},
		{"stray argument to policy eval", []string{"policy", "eval", "--pod", "p", "--nad", "n", "--policy", "x", "extra"}, `unexpected argument "extra"`},
		{"second directory to policy push", []string{"policy", "push", "a", "b"}, `unexpected argument "b"`},
		{"policy push without a directory", []string{"policy", "push"}, "name one directory"},
		{"bad --on-delete", []string{"policy", "push", "--on-delete", "Never", "dir"}, `--on-delete "Never": want Keep or AllowAll`},
		{"stray argument to install", []string{"install", "stray"}, `plexusctl install: unexpected argument "stray"`},
		{"kubectl flag to install", []string{"install", "--context", "admin"}, "--context: install connects with --server"},
		{"namespace to install", []string{"install", "-n", "x"}, "--namespace: install connects with --server"},
		{"stray argument to migrate", []string{"migrate", "--from", from, "extra"}, `plexusctl migrate: unexpected argument "extra"`},
		{"migrate --baseline without a cluster", []string{"migrate", "--from", from, "--baseline"}, "give --kubeconfig"},
		{"second module to ext inspect", []string{"ext", "inspect", "a.wasm", "b.wasm"}, `unexpected argument "b.wasm"`},
		{"ext inspect without a module", []string{"ext", "inspect"}, "name the module"},
		{"ext warm without modules", []string{"ext", "warm", "cache"}, "name a cache directory and modules"},
		{"ext run without --hook", []string{"ext", "run", "m.wasm", "--input", "in.json"}, "run needs --hook and --input"},
		{"ext run with a negative timeout", []string{"ext", "run", "m.wasm", "--hook", "prepare", "--input", "x", "--timeout", "-1s"}, "--timeout -1s is negative"},
		{"stray argument to ext pack", []string{"ext", "pack", "--wasm", "m.wasm", "-o", "x.tar", "extra"}, `unexpected argument "extra"`},
		{"stray argument to explain pod", []string{"explain", "pod", "a/b", "c"}, `plexusctl explain pod: unexpected argument "c"`},
		{"explain pod with -n of another namespace", []string{"explain", "pod", "a/b", "-n", "c"}, `pod "a/b" is not in --namespace "c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCtl(t, tc.args...)
			if code != codes.ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, codes.ExitUsage, tc.want)
			}
			if !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr %q does not say where the usage is", stderr)
			}
			if stdout != "" {
				t.Errorf("a refused command line wrote to stdout: %q", stdout)
			}
		})
	}
}

func TestGroupNamedAlonePrintsItsUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"policy"}, {"ext"}, {"explain"}} {
		code, stdout, stderr := runCtl(t, args...)
		want := strings.TrimSpace("plexusctl " + strings.Join(args, " "))
		if code != codes.ExitUsage || stdout != "" || !strings.Contains(stderr, want+": name a command") ||
			!strings.Contains(stderr, "Available Commands:") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q's usage", args, code, stderr, codes.ExitUsage, want)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, tc := range []struct{ shell, want string }{
		{"bash", "__start_plexusctl"},
		{"zsh", "#compdef plexusctl"},
		{"fish", "complete -c plexusctl"},
		{"powershell", "Register-ArgumentCompleter"},
	} {
		t.Run(tc.shell, func(t *testing.T) {
			code, stdout, stderr := runCtl(t, "completion", tc.shell)
			if code != codes.ExitOK || !strings.Contains(stdout, tc.want) || stderr != "" {
				t.Fatalf("exit %d, %d bytes lacking %q, stderr %q", code, len(stdout), tc.want, stderr)
			}
		})
	}
}

// The completion machinery answers with the commands and flags plexusctl
// has, as the shell asks (cobra's hidden __complete command).
func TestCompletionOffersCommandsAndFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"policy", "ext", "install", "migrate", "explain", "version", "completion"}},
		{[]string{"__complete", "policy", ""}, []string{"test", "check", "fmt", "eval", "baseline", "push", "status"}},
		{[]string{"__complete", "explain", "pod", "--"}, []string{"--filename", "--nad", "--kubeconfig", "--context", "--namespace"}},
		{[]string{"__complete", "help", "p"}, []string{"policy"}},
	} {
		code, stdout, _ := runCtl(t, tc.args...)
		for _, w := range tc.want {
			if code != codes.ExitOK || !strings.Contains(stdout, w) {
				t.Errorf("%v: exit %d, completions lack %q:\n%s", tc.args, code, w, stdout)
			}
		}
	}
}

func TestKubectlPluginName(t *testing.T) {
	for _, tc := range []struct {
		name      string
		invokedAs string
		args      []string
		code      int
		want      string // in stdout, or stderr when the exit is not 0
	}{
		{"root usage", "/usr/local/bin/kubectl-plexus", []string{"--help"}, codes.ExitOK, "Usage:\n  kubectl plexus [command]"},
		{"subcommand usage", "kubectl-plexus", []string{"explain", "pod", "--help"}, codes.ExitOK, "Usage:\n  kubectl plexus explain pod (NAMESPACE/NAME"},
		{"examples", "kubectl-plexus", []string{"policy", "--help"}, codes.ExitOK, "  kubectl plexus policy test policies/library"},
		{"errors", "kubectl-plexus", []string{"nope"}, codes.ExitUsage, `kubectl plexus: unknown command "nope"`},
		{"completion for the binary kubectl runs", "kubectl-plexus", []string{"completion", "bash"}, codes.ExitOK, "__start_kubectl-plexus"},
		{"windows binary", `kubectl-plexus.exe`, []string{"-h"}, codes.ExitOK, "kubectl plexus [command]"},
		{"any other name is plexusctl", "/opt/plexus/bin/plexusctl", []string{"-h"}, codes.ExitOK, "Usage:\n  plexusctl [command]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAs(t, tc.invokedAs, tc.args...)
			out := stdout
			if tc.code != codes.ExitOK {
				out = stderr
			}
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, tc.code, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	if code, stdout, _ := runCtl(t, "version"); code != codes.ExitOK || stdout != Version+"\n" {
		t.Fatalf("exit %d, %q", code, stdout)
	}
}

// policy test's -v keeps its meaning, written -v=false as before (or --v).
func TestPolicyTestVerboseFlag(t *testing.T) {
	for _, v := range []string{"-v=false", "--v=false"} {
		code, out, stderr := runCtl(t, "policy", "test", v, library)
		if code != codes.ExitOK || strings.Contains(out, "test_network_of_other_namespace_is_denied") {
			t.Errorf("%s: exit %d, stderr %q, output lists every test:\n%s", v, code, stderr, out)
		}
	}
}

// Every invocation of plexusctl in deploy/ parses: the flags exist, with
// --flag=value and boolean --flag, and nothing is left over.
func TestDeployInvocationsParse(t *testing.T) {
	var found int
	for _, inv := range deployInvocations(t) {
		found++
		root := newRootCmd("plexusctl", &bytes.Buffer{}, &bytes.Buffer{})
		cmd, rest, err := root.Find(inv)
		if err != nil || cmd == root {
			t.Errorf("%v: no such command (%v)", inv, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%v: %v", inv, err)
			continue
		}
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("%v: %v", inv, err)
		}
	}
	if found < 1 {
		t.Fatalf("found %d plexusctl invocations in deploy/, want the thin DaemonSet's", found)
	}
}

// deployInvocations are the plexusctl command lines of deploy/'s
// containers (command after the binary, then args).
func deployInvocations(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	err := filepath.WalkDir("../../deploy", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			out = append(out, plexusctlCommands(t, path, doc)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func plexusctlCommands(t *testing.T, path, doc string) [][]string {
	var obj struct {
		Spec struct {
			Template struct {
				Spec struct {
					InitContainers, Containers []struct {
						Command, Args []string
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return nil // not a workload (kustomization patches, CRDs, ...)
	}
	pod := obj.Spec.Template.Spec
	var out [][]string
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		if len(c.Command) > 0 && filepath.Base(c.Command[0]) == "plexusctl" {
			t.Logf("%s: plexusctl %s", path, strings.Join(append(c.Command[1:], c.Args...), " "))
			out = append(out, append(append([]string{}, c.Command[1:]...), c.Args...))
		}
	}
	return out
}

// deploy/extensions' patches append flags to deploy/thin's installer: the
// result parses, and the last --config wins, as the patches rely on.
func TestDeployArgPatchesParse(t *testing.T) {
	data, err := os.ReadFile("../../deploy/thin/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := plexusctlCommands(t, "deploy/thin/daemonset.yaml", string(data))
	if len(base) != 1 {
		t.Fatalf("deploy/thin runs plexusctl %d times, want once", len(base))
	}
	patches, err := filepath.Glob("../../deploy/extensions/*/args.yaml")
	if err != nil || len(patches) == 0 {
		t.Fatalf("no args.yaml patches: %v", err)
	}
	for _, p := range patches {
		t.Run(filepath.Base(filepath.Dir(p)), func(t *testing.T) {
			added := argPatch(t, p)
			root := newRootCmd("plexusctl", &bytes.Buffer{}, &bytes.Buffer{})
			cmd, rest, err := root.Find(append(append([]string{}, base[0]...), added...))
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.ParseFlags(rest); err != nil || len(cmd.Flags().Args()) > 0 {
				t.Fatalf("%v: %v, left over %v", rest, err, cmd.Flags().Args())
			}
			last := added[len(added)-1]
			if got, _ := cmd.Flags().GetString("config"); "--config="+got != last {
				t.Errorf("--config is %q, want the last one given, %q", got, last)
			}
		})
	}
}

// argPatch reads a JSON patch's values appended to the first container's
// args.
func argPatch(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Op, Path string
		Value    string
	}
	if err := yaml.Unmarshal(data, &ops); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, o := range ops {
		if o.Op == "add" && o.Path == "/spec/template/spec/containers/0/args/-" {
			out = append(out, o.Value)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s adds no args", path)
	}
	return out
}

// plexusctl install --binaries-only, as deploy/'s init container runs
// it: copies and exits 0.
func TestInstallBinariesOnly(t *testing.T) {
	src, dst, conf := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "plexus"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCtl(t, "install", "--binaries-only", "--src-bin-dir="+src, "--binaries=plexus",
		"--cni-bin-dir="+dst, "--default-conf-dir="+conf)
	if code != codes.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dst, "plexus")); err != nil {
		t.Fatalf("binary not installed: %v", err)
	}
}
