package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/explain"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/push"
)

func newPolicyCmd(a *app) *cobra.Command {
	c := newGroupCmd("policy", "test, check, format, evaluate and push s7.4 Rego policies",
		newPolicyTestCmd(), newPolicyCheckCmd(), newPolicyFmtCmd(), newPolicyEvalCmd(),
		newPolicyBaselineCmd(), newPolicyPushCmd(a), newPolicyStatusCmd(a))
	c.Example = examples(a.name,
		"policy test policies/library --coverage",
		"policy eval --pod pod.yaml --nad nad.yaml --policy policies/library",
		"policy baseline > policy/baseline.yaml",
		"policy push policy",
		"policy status")
	return c
}

// needPaths is the argument check of the commands that read policy files.
var needPaths = argsBetween(1, -1, "name at least one file or directory")

func newPolicyTestCmd() *cobra.Command {
	var opts policies.TestOptions
	c := &cobra.Command{
		Use:   "test PATHS...",
		Short: "run the Rego unit tests (test_* rules)",
		Long: `Run the test_* rules of the .rego files in PATHS (files or directories);
exit 1 when one fails, or when there is none.`,
		Args: needPaths,
		RunE: func(cmd *cobra.Command, paths []string) error {
			sum, err := policies.RunTests(cmd.Context(), paths, opts, cmd.OutOrStdout())
			if err != nil {
				return failed(err)
			}
			if !sum.OK() {
				return exitStatus(codes.ExitFail) // the report says which
			}
			return nil
		},
	}
	c.Flags().BoolVar(&opts.Coverage, "coverage", false, "print coverage of the non-test modules")
	// -v as before; --v too, as Go's flag package read it.
	c.Flags().BoolVarP(&opts.Verbose, "v", "v", true, "list every test, with a trace for failures")
	return c
}

func newPolicyCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check PATHS...",
		Short: "compile strictly, *_test.rego included",
		Args:  needPaths,
		RunE: func(cmd *cobra.Command, paths []string) error {
			if err := policies.Check(cmd.Context(), paths); err != nil {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %s\n", strings.Join(paths, " "))
			return nil
		},
	}
}

func newPolicyFmtCmd() *cobra.Command {
	var check bool
	c := &cobra.Command{
		Use:   "fmt PATHS...",
		Short: "format .rego files in place, or list unformatted ones",
		Args:  needPaths,
		RunE: func(cmd *cobra.Command, paths []string) error {
			files, err := policies.Format(paths, check)
			for _, f := range files {
				fmt.Fprintln(cmd.OutOrStdout(), f)
			}
			if err != nil {
				return failed(err)
			}
			if check && len(files) > 0 {
				return exitStatus(codes.ExitFail)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&check, "check", false, "change nothing; list unformatted files and exit 1 if there are any")
	return c
}

func newPolicyEvalCmd() *cobra.Command {
	var opts policies.EvalOptions
	var nsLabels labelsFlag
	c := &cobra.Command{
		Use:   "eval --pod POD.yaml --nad NAD.yaml --policy PATH...",
		Short: "decide one attachment; exit 0 allowed, 2 denied",
		Long: `Build the policy input of one attachment (the pod, the NAD, the selection
element) and decide it; print both as JSON. Exit 0 when allowed, 2 when
denied.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.NamespaceLabels = nsLabels.labels
			switch {
			case opts.PodFile == "" || opts.NADFile == "":
				return usageErrorf("--pod and --nad are required")
			case len(opts.Policies) == 0:
				return usageErrorf("name the policy with --policy")
			}
			res, err := policies.Eval(cmd.Context(), opts)
			if err != nil {
				return failed(err)
			}
			out, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				return failed(fmt.Errorf("encoding the decision: %w", err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(out))
			if !res.Decision.Allowed {
				return exitStatus(codes.ExitDenied)
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVar(&opts.PodFile, "pod", "", "Pod manifest (YAML or JSON)")
	fs.StringVar(&opts.NADFile, "nad", "", "NetworkAttachmentDefinition manifest")
	fs.StringVar(&opts.Selection, "selection", "", "the selection element as a JSON object (default: from the pod's annotation)")
	fs.Var(&nsLabels, "namespace-labels", "the pod namespace's labels, k=v,... (default: unknown)")
	fs.StringArrayVar(&opts.Data, "data", nil, "data file or directory (repeatable)")
	fs.StringArrayVar(&opts.Policies, "policy", nil, "policy file or directory (repeatable)")
	fs.StringVar(&opts.Query, "query", "", "decision query (default "+policies.DefaultQuery+")")
	return c
}

func newPolicyBaselineCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "baseline",
		Short: "print the image's baseline.yaml, to edit and push",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(policies.BaselineData())
			return failed(err)
		},
	}
}

func newPolicyPushCmd(a *app) *cobra.Command {
	var name, onDelete, library string
	c := &cobra.Command{
		Use:   "push DIR",
		Short: "test DIR's modules and data with the library, then create or update the AttachmentPolicy",
		Long: `Read DIR's .rego modules and data files, compile them with the rule library
and run their tests as a node will; only then create or update the
AttachmentPolicy nodes follow, and print its revision.`,
		Args: argsBetween(1, 1, "name one directory"),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if onDelete != plexusapi.OnDeleteKeep && onDelete != plexusapi.OnDeleteAllowAll {
				return usageErrorf("--on-delete %q: want Keep or AllowAll", onDelete)
			}
			// Verify before connecting: a policy that fails its tests
			// needs no cluster to say so.
			dir, out := dirs[0], cmd.OutOrStdout()
			spec, files, err := push.Read(dir)
			if err != nil {
				return failed(err)
			}
			spec.OnDelete = onDelete
			_, passed, err := push.Verify(cmd.Context(), library, files, "(the directory)")
			if err != nil {
				return failed(fmt.Errorf("%s: nothing pushed: %w", dir, err))
			}
			fmt.Fprintf(out, "%s: %d modules, %d data files, %d tests passed\n", dir, len(spec.Modules), len(spec.Data), passed)
			c, err := a.kube.clients()
			if err != nil {
				return failed(err)
			}
			rev, err := push.Push(cmd.Context(), c.Plexus, name, spec)
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(out, "AttachmentPolicy %s: revision %s\n", name, rev)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", explain.DefaultPolicyObject, "the AttachmentPolicy to create or update")
	c.Flags().StringVar(&onDelete, "on-delete", plexusapi.OnDeleteKeep, "what nodes do if the object is deleted: Keep or AllowAll")
	c.Flags().StringVar(&library, "library", "", "the rule library to test with (default: the one built into plexusctl, as the image ships it)")
	return c
}

func newPolicyStatusCmd(a *app) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "status",
		Short: "the revision each node enforces",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.kube.clients()
			if err != nil {
				return failed(err)
			}
			return failed(push.Status(cmd.Context(), c.Plexus, name, cmd.OutOrStdout()))
		},
	}
	c.Flags().StringVar(&name, "name", explain.DefaultPolicyObject, "the AttachmentPolicy")
	return c
}

// labelsFlag is k=v,k2=v2; given, even empty, it makes the labels known.
type labelsFlag struct{ labels map[string]string }

func (l *labelsFlag) String() string {
	parts := make([]string, 0, len(l.labels))
	for k, v := range l.labels {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (l *labelsFlag) Type() string { return "k=v,..." }

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
