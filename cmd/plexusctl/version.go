package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

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
