package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/policies"
)

type policyCommand struct {
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func policyCommands() map[string]policyCommand {
	return map[string]policyCommand{
		"test":  {"test [--coverage] [-v=false] PATHS...   run the Rego unit tests (test_* rules)", policyTest},
		"check": {"check PATHS...                          compile strictly, *_test.rego included", policyCheck},
		"fmt":   {"fmt [--check] PATHS...                  format .rego files in place, or list unformatted ones", policyFmt},
		"eval": {"eval --pod POD.yaml --nad NAD.yaml [--selection JSON] [--namespace-labels k=v,...]\n" +
			"       [--data FILE]... [--policy PATH]... [--query Q]   decide; exit 0 allowed, 2 denied", policyEval},
		"push": {"push [--kubeconfig F] [--name cluster] [--on-delete Keep|AllowAll] [--library DIR] DIR\n" +
			"       test DIR's modules and data with the library, then create or update the AttachmentPolicy", policyPush},
		"status":   {"status [--kubeconfig F] [--name cluster]   the revision each node enforces", policyStatus},
		"baseline": {"baseline                                print the image's baseline.yaml, to edit and push", policyBaseline},
	}
}

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := policyCommands()
	if len(args) == 0 {
		policyUsage(stderr, cmds)
		return codes.ExitUsage
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "plexusctl policy: unknown command %q\n", args[0])
		policyUsage(stderr, cmds)
		return codes.ExitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func policyUsage(w io.Writer, cmds map[string]policyCommand) {
	fmt.Fprintln(w, "usage:")
	for _, n := range []string{"test", "check", "fmt", "eval", "baseline", "push", "status"} {
		fmt.Fprintf(w, "  plexusctl policy %s\n", cmds[n].usage)
	}
}

// parse accepts flags before, between and after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("plexusctl policy "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func needPaths(paths []string, stderr io.Writer, name string) bool {
	if len(paths) == 0 {
		fmt.Fprintf(stderr, "plexusctl policy %s: name at least one file or directory\n", name)
		return false
	}
	return true
}

func policyTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", stderr)
	coverage := fs.Bool("coverage", false, "print coverage of the non-test modules")
	verbose := fs.Bool("v", true, "list every test, with a trace for failures")
	paths, err := parse(fs, args)
	if err != nil || !needPaths(paths, stderr, "test") {
		return codes.ExitUsage
	}
	sum, err := policies.RunTests(ctx, paths, policies.TestOptions{Verbose: *verbose, Coverage: *coverage}, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl policy test: %v\n", err)
		return codes.ExitFail
	}
	if !sum.OK() {
		return codes.ExitFail
	}
	return codes.ExitOK
}

func policyCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	paths, err := parse(newFlagSet("check", stderr), args)
	if err != nil || !needPaths(paths, stderr, "check") {
		return codes.ExitUsage
	}
	if err := policies.Check(ctx, paths); err != nil {
		fmt.Fprintf(stderr, "plexusctl policy check: %v\n", err)
		return codes.ExitFail
	}
	fmt.Fprintf(stdout, "ok: %s\n", strings.Join(paths, " "))
	return codes.ExitOK
}

func policyFmt(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fmt", stderr)
	check := fs.Bool("check", false, "change nothing; list unformatted files and exit 1 if there are any")
	paths, err := parse(fs, args)
	if err != nil || !needPaths(paths, stderr, "fmt") {
		return codes.ExitUsage
	}
	files, err := policies.Format(paths, *check)
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl policy fmt: %v\n", err)
		return codes.ExitFail
	}
	if *check && len(files) > 0 {
		return codes.ExitFail
	}
	return codes.ExitOK
}

func policyEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseEval(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "plexusctl policy eval: %v\n", err)
		}
		return codes.ExitUsage
	}
	res, err := policies.Eval(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl policy eval: %v\n", err)
		return codes.ExitFail
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl policy eval: %v\n", err)
		return codes.ExitFail
	}
	fmt.Fprintln(stdout, string(out))
	if !res.Decision.Allowed {
		return codes.ExitDenied
	}
	return codes.ExitOK
}

func parseEval(args []string, stderr io.Writer) (policies.EvalOptions, error) {
	var opts policies.EvalOptions
	var data, pols stringList
	var nsLabels labelsFlag
	fs := newFlagSet("eval", stderr)
	fs.StringVar(&opts.PodFile, "pod", "", "Pod manifest (YAML or JSON)")
	fs.StringVar(&opts.NADFile, "nad", "", "NetworkAttachmentDefinition manifest")
	fs.StringVar(&opts.Selection, "selection", "", "the selection element as a JSON object (default: from the pod's annotation)")
	fs.Var(&nsLabels, "namespace-labels", "the pod namespace's labels, k=v,... (default: unknown)")
	fs.Var(&data, "data", "data file or directory (repeatable)")
	fs.Var(&pols, "policy", "policy file or directory (repeatable)")
	fs.StringVar(&opts.Query, "query", "", "decision query (default "+policies.DefaultQuery+")")
	rest, err := parse(fs, args)
	if err != nil {
		return opts, err
	}
	switch {
	case len(rest) > 0:
		return opts, fmt.Errorf("unexpected arguments %q", rest)
	case opts.PodFile == "" || opts.NADFile == "":
		return opts, fmt.Errorf("--pod and --nad are required")
	case len(pols) == 0:
		return opts, fmt.Errorf("name the policy with --policy")
	}
	opts.Policies, opts.Data, opts.NamespaceLabels = pols, data, nsLabels.labels
	return opts, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// labelsFlag is k=v,k2=v2; given, even empty, it makes the labels known.
type labelsFlag struct{ labels map[string]string }

func (l *labelsFlag) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, 0, len(l.labels))
	for k, v := range l.labels {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (l *labelsFlag) Set(v string) error {
	l.labels = map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q is not key=value", kv)
		}
		l.labels[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return nil
}
