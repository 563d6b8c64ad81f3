package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/plexus-cni/plexus/cmd/internal/install"
	"github.com/plexus-cni/plexus/core/codes"
)

// newInstallCmd is "plexusctl install": the DaemonSet's installer. It
// runs until SIGTERM (the pod stops), then uninstalls if told to.
func newInstallCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "install",
		Short: "install plexus on a node (the DaemonSet's entrypoint, s6.1)",
		Long: `Install plexus on the node this pod runs on: copy the binaries, the policy
files and the extension modules, write plexus's CNI config before the
default network's and the plugin's kubeconfig, and keep them current until
SIGTERM. Environment: NODE_NAME (--node-name), PLEXUS_UNINSTALL=true
(--uninstall).

It connects to the API with --server, --token-file and --ca-file, as a pod
does; its --kubeconfig is the file it writes for the plugin. kubectl's
other connection flags do not apply here and are refused.`,
		Args: noArgs,
	}
	flags := install.AddFlags(c.Flags(), os.Getenv)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if name := a.kube.given(true); name != "" {
			return usageErrorf("--%s: install connects with --server, --token-file and --ca-file", name)
		}
		o, err := flags.Options(os.Getenv)
		if err != nil {
			return usageError(err)
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM)
		defer stop()
		if code := install.Run(ctx, o, cmd.ErrOrStderr(), Version); code != codes.ExitOK {
			return exitStatus(code) // install.Run printed why
		}
		return nil
	}
	return c
}
