package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/explain"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies/push"
)

// pushArgs are policy push's flags.
type pushArgs struct {
	name, onDelete, library string
}

func newPolicyPushCmd(a *app) *cobra.Command {
	var p pushArgs
	c := &cobra.Command{
		Use:   "push DIR",
		Short: "test DIR's modules and data with the library, then create or update the AttachmentPolicy",
		Long: `Read DIR's .rego modules and data files, compile them with the rule library
and run their tests as a node will; only then create or update the
AttachmentPolicy nodes follow, and print its revision.`,
		Args: argsBetween(1, 1, "name one directory"),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if p.onDelete != plexusapi.OnDeleteKeep && p.onDelete != plexusapi.OnDeleteAllowAll {
				return usageErrorf("--on-delete %q: want Keep or AllowAll", p.onDelete)
			}
			return failed(a.pushPolicy(cmd.Context(), dirs[0], p, cmd.OutOrStdout()))
		},
	}
	c.Flags().StringVar(&p.name, "name", explain.DefaultPolicyObject, "the AttachmentPolicy to create or update")
	c.Flags().StringVar(&p.onDelete, "on-delete", plexusapi.OnDeleteKeep, "what nodes do if the object is deleted: Keep or AllowAll")
	c.Flags().StringVar(&p.library, "library", "", "the rule library to test with (default: the one built into plexusctl, as the image ships it)")
	return c
}

// pushPolicy verifies before it connects: a policy that fails its tests
// needs no cluster to say so.
func (a *app) pushPolicy(ctx context.Context, dir string, p pushArgs, stdout io.Writer) error {
	spec, files, err := push.Read(dir)
	if err != nil {
		return err
	}
	spec.OnDelete = p.onDelete
	_, passed, err := push.Verify(ctx, p.library, files, "(the directory)")
	if err != nil {
		return fmt.Errorf("%s: nothing pushed: %w", dir, err)
	}
	fmt.Fprintf(stdout, "%s: %d modules, %d data files, %d tests passed\n", dir, len(spec.Modules), len(spec.Data), passed)
	c, err := a.kube.clients()
	if err != nil {
		return err
	}
	rev, err := push.Push(ctx, c.Plexus, p.name, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "AttachmentPolicy %s: revision %s\n", p.name, rev)
	return nil
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
