package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/explain"
	"github.com/plexus-cni/plexus/core/codes"
)

const explainUsage = `usage: plexusctl explain pod NAMESPACE/NAME [flags]
       plexusctl explain pod -f POD.yaml [--nad NAD.yaml]... [flags]
why a pod has, or does not have, its networks; exit 0 when it would get
every network it asks for, 1 when something is wrong
flags:
  --kubeconfig PATH   default $KUBECONFIG, else ~/.kube/config (with -f: only if given or $KUBECONFIG is set)
  -f POD.yaml         explain a manifest, before the pod exists
  --nad FILE          a NetworkAttachmentDefinition manifest, looked at before the cluster (repeatable)
  --policy PATH       Rego modules, data files, directories, as the plugin config's policy.paths (repeatable)
  --policy-object NAME  without --policy, decide with this AttachmentPolicy and the rule library
                      built into plexusctl, as nodes do (default cluster; "" for no policy)
  --extensions FILE   plexus's extensions config ({"modules": [...]})
  --node NAME         also report the node's side: its plexus pod, its PlexusNode (config,
                      default network, missing plugins, policy, extensions) and its
                      AttachmentPolicy status entries
  -o text|json        output format (default text)`

// runExplain is "plexusctl explain": only "pod" for now.
func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "pod" {
		fmt.Fprintln(stderr, explainUsage)
		return codes.ExitUsage
	}
	a, err := parseExplain(args[1:], stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "plexusctl explain pod: %v\n%s\n", err, explainUsage)
		}
		return codes.ExitUsage
	}
	if a.opts.Cluster, err = explainCluster(a.opts.PodFile != "", a.kubeconfig); err != nil {
		fmt.Fprintf(stderr, "plexusctl explain pod: %s\n", explain.Printable(err.Error()))
		return codes.ExitFail
	}
	rep, err := explain.Explain(ctx, a.opts)
	if err != nil {
		fmt.Fprintf(stderr, "plexusctl explain pod: %s\n", explain.Printable(err.Error()))
		return codes.ExitFail
	}
	if err := writeExplain(stdout, rep, a.output); err != nil {
		fmt.Fprintf(stderr, "plexusctl explain pod: %s\n", explain.Printable(err.Error()))
		return codes.ExitFail
	}
	if !rep.OK {
		return codes.ExitFail
	}
	return codes.ExitOK
}

func writeExplain(w io.Writer, rep *explain.Report, output string) error {
	if output == "text" {
		return explain.WriteText(w, rep)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// explainArgs are the parsed flags; the cluster is connected after.
type explainArgs struct {
	opts       explain.Options
	output     string
	kubeconfig string
}

func parseExplain(args []string, stderr io.Writer) (explainArgs, error) {
	var a explainArgs
	opts := &a.opts
	var nads, pols stringList
	fs := flag.NewFlagSet("plexusctl explain pod", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, explainUsage) }
	kubeconfig := fs.String("kubeconfig", "", "")
	fs.StringVar(&opts.PodFile, "f", "", "")
	fs.Var(&nads, "nad", "")
	fs.Var(&pols, "policy", "")
	fs.StringVar(&opts.PolicyObject, "policy-object", explain.DefaultPolicyObject, "")
	fs.StringVar(&opts.ExtensionsFile, "extensions", "", "")
	fs.StringVar(&opts.Node, "node", "", "")
	fs.StringVar(&a.output, "o", "text", "")
	rest, err := parse(fs, args)
	if err != nil {
		return a, err
	}
	if a.output != "text" && a.output != "json" {
		return a, fmt.Errorf("-o %q: want text or json", a.output)
	}
	if err := podArg(opts, rest); err != nil {
		return a, err
	}
	opts.NADFiles, opts.Policies, a.kubeconfig = nads, pols, *kubeconfig
	return a, nil
}

// podArg takes NAMESPACE/NAME (NAME alone is in "default"), or none with -f.
func podArg(opts *explain.Options, rest []string) error {
	switch {
	case opts.PodFile != "" && len(rest) == 0:
		return nil
	case opts.PodFile != "":
		return fmt.Errorf("give -f or NAMESPACE/NAME, not both")
	case len(rest) != 1:
		return fmt.Errorf("name one pod as NAMESPACE/NAME, or give -f POD.yaml")
	}
	ns, name, found := strings.Cut(rest[0], "/")
	if !found {
		ns, name = "default", rest[0]
	}
	if ns == "" || name == "" {
		return fmt.Errorf("pod %q: want NAMESPACE/NAME", rest[0])
	}
	opts.Namespace, opts.Name = ns, name
	return nil
}

// explainCluster connects unless a manifest is explained without any
// kubeconfig named: then NADs come from --nad only.
func explainCluster(manifest bool, kubeconfig string) (*explain.Cluster, error) {
	if manifest && kubeconfig == "" && os.Getenv("KUBECONFIG") == "" {
		return nil, nil
	}
	c, err := explain.NewCluster(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return c, nil
}
