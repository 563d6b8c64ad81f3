package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/explain"
	"github.com/plexus-cni/plexus/core/codes"
)

// newExplainCmd is "plexusctl explain": only "pod" for now.
func newExplainCmd(a *app) *cobra.Command {
	c := newGroupCmd("explain", "explain why a pod has, or does not have, its networks", newExplainPodCmd(a))
	c.Example = examples(a.name, "explain pod team-a/web", "explain pod -f web.yaml --nad blue.yaml")
	return c
}

func newExplainPodCmd(a *app) *cobra.Command {
	var opts explain.Options
	var output string
	c := &cobra.Command{
		Use:   "pod (NAMESPACE/NAME | -f POD.yaml)",
		Short: "why a pod has, or does not have, its networks",
		Long: `Explain why a pod has, or does not have, its networks: its selection, each
network's NAD and config, the policy's decision, the last ADD's events and,
with --node, the node's side. Exit 0 when the pod would get every network
it asks for, 1 when something is wrong.

The ADD is planned as the node plans it, with the node's settings (compat,
strictSelection, systemNamespace, defaultNetworks, systemNamespaces): those
of --config, else those the PlexusNode of --node (or of the pod's node)
reports, else plexus's defaults, with a warning naming them.

NAME alone is in -n/--namespace's namespace, else in default. With -f, the
cluster is read (for NADs, the policy object, the node) only when a
connection flag such as --kubeconfig is given or $KUBECONFIG is set.`,
		Example: examples(a.name,
			"explain pod team-a/web",
			"explain pod team-a/web --kubeconfig admin.kubeconfig --node node-1",
			"explain pod -f web.yaml --nad blue.yaml",
			"explain pod -f web.yaml --nad blue.yaml --config /etc/cni/net.d/00-plexus.conf",
			"explain pod team-a/web --policy policies/library --policy admin.yaml -o json"),
		Args: argsBetween(0, 1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usageErrorf("-o %q: want text or json", output)
			}
			if err := podArg(&opts, args, a.kube.namespace("")); err != nil {
				return usageError(err)
			}
			// A manifest explained with no cluster named (no connection
			// flag, $KUBECONFIG unset) takes its NADs from --nad only.
			if opts.PodFile == "" || a.kube.given(false) != "" || os.Getenv("KUBECONFIG") != "" {
				var err error
				if opts.Cluster, err = a.kube.clients(); err != nil {
					return failed(printable{err})
				}
			}
			rep, err := explain.Explain(cmd.Context(), opts)
			if err == nil {
				if output == "text" {
					err = explain.WriteText(cmd.OutOrStdout(), rep)
				} else {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					err = enc.Encode(rep)
				}
			}
			if err != nil {
				return failed(printable{err})
			}
			if !rep.OK {
				return exitStatus(codes.ExitFail) // the report says why
			}
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVarP(&opts.PodFile, "filename", "f", "", "explain a Pod manifest, before the pod exists")
	fs.StringArrayVar(&opts.NADFiles, "nad", nil, "a NetworkAttachmentDefinition manifest, looked at before the cluster (repeatable)")
	fs.StringArrayVar(&opts.Policies, "policy", nil, "Rego modules, data files, directories, as the plugin config's policy.paths (repeatable)")
	fs.StringVar(&opts.PolicyObject, "policy-object", explain.DefaultPolicyObject,
		`without --policy, decide with this AttachmentPolicy and the rule library built into plexusctl, as nodes do ("" for no policy)`)
	fs.StringVar(&opts.ExtensionsFile, "extensions", "", `plexus's extensions config ({"modules": [...]})`)
	fs.StringVar(&opts.ConfigFile, "config", "", "plan with this plexus config's settings, not the node's PlexusNode's")
	fs.StringVar(&opts.Node, "node", "", "also report the node's side: its plexus pod, its PlexusNode (config, default network, missing plugins, policy, extensions) and its AttachmentPolicy status entries")
	fs.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return c
}

// podArg takes NAMESPACE/NAME, or NAME in namespace (default when
// empty), or none with -f.
func podArg(opts *explain.Options, rest []string, namespace string) error {
	switch {
	case opts.PodFile != "" && len(rest) == 0:
		return nil
	case opts.PodFile != "":
		return fmt.Errorf("give -f or NAMESPACE/NAME, not both")
	case len(rest) != 1:
		return fmt.Errorf("name one pod as NAMESPACE/NAME, or give -f POD.yaml")
	}
	ns, name, found := strings.Cut(rest[0], "/")
	switch {
	case !found:
		ns, name = cmp.Or(namespace, "default"), rest[0]
	case namespace != "" && ns != namespace:
		return fmt.Errorf("pod %q is not in --namespace %q", rest[0], namespace)
	}
	if ns == "" || name == "" {
		return fmt.Errorf("pod %q: want NAMESPACE/NAME", rest[0])
	}
	opts.Namespace, opts.Name = ns, name
	return nil
}

// printable keeps what the cluster said (names, messages) from writing
// control characters to the terminal.
type printable struct{ err error }

func (p printable) Error() string { return explain.Printable(p.err.Error()) }

func (p printable) Unwrap() error { return p.err }
