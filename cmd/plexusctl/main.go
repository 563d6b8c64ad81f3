// Command plexusctl is the admin and vendor tool of plexus. Its commands
// are cobra commands, each group built in its own file (policy, ext,
// install, migrate, explain); the logic stays in the library packages.
// Copied or linked as kubectl-plexus on PATH, it is also the kubectl
// plugin `kubectl plexus`.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/plexus-cni/plexus/core/codes"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := execute(ctx, newRootCmd(os.Args[0], os.Stdout, os.Stderr), os.Args[1:])
	stop()
	os.Exit(code)
}

// pluginBinary is the file name kubectl looks for on PATH to run
// `kubectl plexus`.
const pluginBinary = "kubectl-plexus"

// app is what the commands share.
type app struct {
	// name is the program as usage lines show it: plexusctl, or
	// "kubectl plexus" when run as a kubectl plugin.
	name string
	kube *kubeFlags
}

// newRootCmd builds the command tree; invokedAs is os.Args[0], whose base
// name tells whether plexusctl runs as a kubectl plugin.
func newRootCmd(invokedAs string, stdout, stderr io.Writer) *cobra.Command {
	root := newGroupCmd("plexusctl", "plexus's admin and vendor tool")
	root.Long = `Test, push and follow attachment policies, check and pack WebAssembly
extensions, install plexus on a node, convert a Multus config, and explain
why a pod has, or does not have, its networks.

The commands that read the cluster take kubectl's connection flags
(--kubeconfig, --context, -n/--namespace, ...); without them,
$KUBECONFIG, else ~/.kube/config.`
	// execute prints errors, with the exit status each maps to.
	root.SilenceErrors, root.SilenceUsage = true, true
	if strings.TrimSuffix(filepath.Base(invokedAs), ".exe") == pluginBinary {
		// Cobra shows the display name in usage lines, and keeps the
		// binary's name for completion scripts.
		root.Use = pluginBinary
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl plexus"}
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.SetUsageFunc(writeUsage)
	a := &app{name: root.DisplayName(), kube: newKubeFlags(root.PersistentFlags())}
	root.AddCommand(newPolicyCmd(a), newExtCmd(a), newInstallCmd(a), newMigrateCmd(a), newExplainCmd(a), newVersionCmd())
	root.SetHelpCommand(newHelpCmd())
	return root
}

// execute runs the command line and returns the exit status: an
// exitError's, else ExitUsage (cobra's and pflag's parse errors).
func execute(ctx context.Context, root *cobra.Command, args []string) int {
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return codes.ExitOK
	}
	var e *exitError
	if !errors.As(err, &e) {
		e = &exitError{code: codes.ExitUsage, err: err}
	}
	// The error names the command; a usage error adds the usage or where
	// to find it.
	w := cmd.ErrOrStderr()
	if e.err != nil {
		fmt.Fprintf(w, "%s: %v\n", cmd.CommandPath(), e.err)
	}
	switch {
	case e.usage:
		fmt.Fprint(w, cmd.UsageString())
	case e.code == codes.ExitUsage:
		fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return e.code
}

// exitError is a command's failure and the exit status it maps to.
type exitError struct {
	code int
	// err nil prints nothing: the command's output already said it.
	err error
	// usage prints the command's whole usage, not a pointer to --help.
	usage bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error { return &exitError{code: codes.ExitUsage, err: err} }

func usageErrorf(format string, args ...any) error { return usageError(fmt.Errorf(format, args...)) }

// failed is a command that could not do its work: exit status 1.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: codes.ExitFail, err: err}
}

// exitStatus ends with code and no message.
func exitStatus(code int) error { return &exitError{code: code} }

// newGroupCmd is a command that only holds others: named alone it prints
// its usage; an argument that is none of its commands is refused.
func newGroupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use: use, Short: short, Args: subcommandArgs, SuggestionsMinimumDistance: 2,
		RunE: func(*cobra.Command, []string) error {
			return &exitError{code: codes.ExitUsage, err: errors.New("name a command"), usage: true}
		},
	}
	c.AddCommand(subs...)
	return c
}

// subcommandArgs refuses a group's argument: no command has that name.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError(errors.New(msg))
}

// noArgs refuses positional arguments, naming the first.
func noArgs(c *cobra.Command, args []string) error { return argsBetween(0, 0, "")(c, args) }

// argsBetween takes least to most positional arguments (most < 0: no
// limit); missing says what to give when there are too few.
func argsBetween(least, most int, missing string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < least:
			return usageError(errors.New(missing))
		case most >= 0 && len(args) > most:
			return usageErrorf("unexpected argument %q", args[most])
		}
		return nil
	}
}

// examples formats command lines under the program's name.
func examples(prog string, lines ...string) string {
	prefix := "  " + prog + " "
	return prefix + strings.Join(lines, "\n"+prefix)
}

// newHelpCmd is `help [command]`. Unlike cobra's own, it refuses a topic
// it does not know, with a usage error, as an unknown command is.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		// Completion offers the commands under those already typed.
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			parent, _, err := cmd.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, c := range parent.Commands() {
				if c.IsAvailableCommand() && strings.HasPrefix(c.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usageErrorf("unknown help topic %q", strings.Join(args, " "))
			}
			target.InitDefaultHelpFlag() // so that the help lists -h
			return target.Help()
		},
	}
}

// Version is set at build time (-ldflags "-X main.Version=..."); the
// installer reports it in the node's PlexusNode.
var Version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print plexusctl's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), Version)
			return nil
		},
	}
}

// writeUsage is every command's usage (help shows it after the long
// description). It differs from cobra's in two ways: a group, runnable
// only so that it can refuse an unknown command, shows just
// "GROUP [command]"; and below the root, kubectl's connection flags are
// named, not listed, as kubectl does with its global options.
func writeUsage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:\n")
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "  %s [command]\n", c.CommandPath())
	} else {
		fmt.Fprintf(&b, "  %s\n", c.UseLine())
	}
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", c.Example)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\nAvailable Commands:\n")
		for _, sub := range c.Commands() {
			// help is not "available" to cobra, but is worth listing.
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(&b, "  %-*s %s\n", c.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", c.LocalFlags().FlagUsages())
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\nGlobal Flags:\n  kubectl's connection flags (--kubeconfig, --context, -n/--namespace, ...): '%s --help' lists them\n",
			c.Root().CommandPath())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s [command] --help' for more about a command.\n", c.CommandPath())
	}
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}
