package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

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
		writeSubcommands(&b, c)
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

func writeSubcommands(b *strings.Builder, c *cobra.Command) {
	b.WriteString("\nAvailable Commands:\n")
	for _, sub := range c.Commands() {
		// help is not "available" to cobra, but is worth listing.
		if sub.IsAvailableCommand() || sub.Name() == "help" {
			fmt.Fprintf(b, "  %-*s %s\n", c.NamePadding(), sub.Name(), sub.Short)
		}
	}
}
