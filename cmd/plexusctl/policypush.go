package main

import (
	"context"
	"fmt"
	"io"
	"os"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/push"
)

const defaultPolicyObject = "cluster"

func policyPush(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("push", stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG, else ~/.kube/config)")
	name := fs.String("name", defaultPolicyObject, "the AttachmentPolicy to create or update")
	onDelete := fs.String("on-delete", plexusapi.OnDeleteKeep, "what nodes do if the object is deleted: Keep or AllowAll")
	library := fs.String("library", "", "the rule library to test with (default: the one built into plexusctl, as the image ships it)")
	dirs, err := parse(fs, args)
	if err != nil {
		return codes.ExitUsage
	}
	if len(dirs) != 1 {
		fmt.Fprintln(stderr, "plexusctl policy push: name one directory")
		return codes.ExitUsage
	}
	if *onDelete != plexusapi.OnDeleteKeep && *onDelete != plexusapi.OnDeleteAllowAll {
		fmt.Fprintf(stderr, "plexusctl policy push: --on-delete %q: want Keep or AllowAll\n", *onDelete)
		return codes.ExitUsage
	}
	if err := pushPolicy(ctx, dirs[0], *kubeconfig, *name, *onDelete, *library, stdout); err != nil {
		fmt.Fprintf(stderr, "plexusctl policy push: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}

func pushPolicy(ctx context.Context, dir, kubeconfig, name, onDelete, library string, stdout io.Writer) error {
	spec, err := push.Read(dir)
	if err != nil {
		return err
	}
	spec.OnDelete = onDelete
	if library == "" {
		tmp, err := os.MkdirTemp("", "plexus-library-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if library, _, err = policies.WriteBaseline(tmp); err != nil {
			return err
		}
	}
	passed, err := push.Verify(ctx, library, spec)
	if err != nil {
		return fmt.Errorf("%s: nothing pushed: %w", dir, err)
	}
	fmt.Fprintf(stdout, "%s: %d modules, %d data files, %d tests passed\n", dir, len(spec.Modules), len(spec.Data), passed)
	dyn, err := push.Client(kubeconfig)
	if err != nil {
		return err
	}
	rev, err := push.Push(ctx, dyn, name, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "AttachmentPolicy %s: revision %s\n", name, rev)
	return nil
}

func policyStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default $KUBECONFIG, else ~/.kube/config)")
	name := fs.String("name", defaultPolicyObject, "the AttachmentPolicy")
	rest, err := parse(fs, args)
	if err != nil || len(rest) > 0 {
		fmt.Fprintln(stderr, "plexusctl policy status: takes no arguments")
		return codes.ExitUsage
	}
	dyn, err := push.Client(*kubeconfig)
	if err == nil {
		err = push.Status(ctx, dyn, *name, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl policy status: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}

func policyBaseline(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "plexusctl policy baseline: takes no arguments")
		return codes.ExitUsage
	}
	if _, err := stdout.Write(policies.BaselineData()); err != nil {
		return codes.ExitFail
	}
	return codes.ExitOK
}
