package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/cmd/plexusctl/internal/explain"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
)

// kubeFlags are kubectl's connection flags (--kubeconfig, --context,
// -n/--namespace, --server, ...), on the root so that every command names
// a cluster as kubectl does. (install, run in a pod, has its own.)
type kubeFlags struct {
	config *genericclioptions.ConfigFlags
	// flags holds kubectl's flags alone; the root's persistent flags hold
	// the same *pflag.Flag values, so parsing marks them Changed here too.
	flags *pflag.FlagSet
}

func newKubeFlags(fs *pflag.FlagSet) *kubeFlags {
	k := &kubeFlags{config: genericclioptions.NewConfigFlags(true), flags: pflag.NewFlagSet("kubectl", pflag.ContinueOnError)}
	k.config.AddFlags(k.flags)
	fs.AddFlagSet(k.flags)
	return k
}

// clients connects as the flags say: the kubeconfig they name, else
// $KUBECONFIG, else ~/.kube/config, with their overrides.
func (k *kubeFlags) clients() (*explain.Cluster, error) {
	cfg, err := k.config.ToRESTConfig()
	c := &explain.Cluster{}
	if err == nil {
		c.Core, err = kubernetes.NewForConfig(cfg)
	}
	if err == nil {
		c.Dynamic, err = dynamic.NewForConfig(cfg)
	}
	if err == nil {
		c.Plexus, err = versioned.NewForConfig(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cmp.Or(*k.config.KubeConfig, "$KUBECONFIG or ~/.kube/config"), err)
	}
	return c, nil
}

// given names the first connection flag on the command line, "" when none
// is: then a command that can work without the cluster does. Flags that
// only tune a connection or scope a request do not count, unless all.
func (k *kubeFlags) given(all bool) string {
	name, tuning := "", []string{"namespace", "cache-dir", "request-timeout", "disable-compression"}
	k.flags.VisitAll(func(f *pflag.Flag) {
		if name == "" && f.Changed && (all || !slices.Contains(tuning, f.Name)) {
			name = f.Name
		}
	})
	return name
}

// namespace is -n/--namespace when given, else def: a command's own
// default, not the kubeconfig context's namespace.
func (k *kubeFlags) namespace(def string) string {
	if k.flags.Changed("namespace") {
		return *k.config.Namespace
	}
	return def
}
