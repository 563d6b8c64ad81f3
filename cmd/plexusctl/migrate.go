package main

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/migrate"
)

// multusNamespace and multusConfigMap are where the Multus DaemonSet keeps
// its config: migrate's default, whatever the kubeconfig context's
// namespace.
const (
	multusNamespace = "kube-system"
	multusConfigMap = "multus-cni-config"
)

// newMigrateCmd is "plexusctl migrate": a Multus config to plexus's.
func newMigrateCmd(a *app) *cobra.Command {
	var m migrate.Args
	c := &cobra.Command{
		Use:   "migrate [--from FILE] [--out DIR]",
		Short: "convert a Multus config to plexus's config and policy, list pods plexus treats differently",
		Long: `Read a Multus config and write the equivalent plexus config and policy
data (plexus.conf and, with namespaceIsolation, ` + migrate.PolicyDataFile + `),
saying what could not be carried over and why.

The config comes from --from FILE, or else from the Multus DaemonSet's
ConfigMap in the cluster. -n/--namespace names that ConfigMap's namespace
(default ` + multusNamespace + `, not the kubeconfig context's) and --configmap its
name. With the cluster, migrate also lists the pods plexus would treat
differently, and with --baseline what the baseline policy would refuse.

With --from, the cluster is read only when a connection flag is given
(--kubeconfig, --context, --server, ...); without --from it is always
read, through $KUBECONFIG or ~/.kube/config when no flag names it.`,
		Example: examples(a.name,
			"migrate --from /etc/cni/net.d/00-multus.conf --out ./plexus",
			"migrate --kubeconfig ~/.kube/config --out ./plexus",
			"migrate --namespace kube-system --configmap multus-daemon-config",
			"migrate --baseline"),
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m.Namespace = a.kube.namespace(multusNamespace)
			if m.Namespace == "" {
				return usageErrorf("--namespace is empty")
			}
			cluster := m.From == "" || a.kube.given(false) != ""
			if err := m.Validate(cluster); err != nil {
				return usageError(err)
			}
			var client kubernetes.Interface
			if cluster {
				c, err := a.kube.clients()
				if err != nil {
					return failed(err)
				}
				client = c.Core
			}
			return failed(migrate.Run(cmd.Context(), m, client, cmd.OutOrStdout()))
		},
	}
	fs := c.Flags()
	fs.StringVar(&m.From, "from", "", "a Multus CNI config (conf or conflist) or a ConfigMap YAML holding one")
	fs.StringVar(&m.ConfigMap, "configmap", multusConfigMap, "the Multus ConfigMap's name, in -n/--namespace's namespace")
	fs.BoolVar(&m.Baseline, "baseline", false, "also list, one line per pod and reason, what the baseline policy (as built into plexusctl) would refuse")
	fs.StringVar(&m.Out, "out", "", "write plexus.conf and the policy data there (default: print them)")
	fs.StringVar(&m.PolicyDir, "policy-dir", migrate.DefaultPolicyDir, "the node directory the config's policy paths point into")
	return c
}
