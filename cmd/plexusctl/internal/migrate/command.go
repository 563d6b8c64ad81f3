package migrate

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/policies"
)

const usage = `usage: plexusctl migrate [--from FILE] [--kubeconfig FILE [--namespace NS] [--configmap NAME] [--baseline]] [--out DIR] [--policy-dir DIR]

Reads a Multus config and writes the equivalent plexus config and policy data.
  --from FILE          a Multus CNI config (conf or conflist) or a ConfigMap YAML holding one
  --kubeconfig FILE    read the Multus DaemonSet's ConfigMap from the cluster (unless --from is
                       given) and list the pods plexus would treat differently
  --namespace, --configmap   where that ConfigMap is (default kube-system/multus-cni-config)
  --baseline           also list, one line per pod and reason, what the baseline policy
                       (policies/baseline.yaml, as built into plexusctl) would refuse
  --out DIR            write plexus.conf and, with namespaceIsolation, ` + PolicyDataFile + `
                       there (default: print them)
  --policy-dir DIR     the node directory the config's policy paths point into (default ` + DefaultPolicyDir + `)
`

// Command is "plexusctl migrate".
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	from := fs.String("from", "", "")
	kubeconfig := fs.String("kubeconfig", "", "")
	namespace := fs.String("namespace", "kube-system", "")
	configmap := fs.String("configmap", "multus-cni-config", "")
	out := fs.String("out", "", "")
	policyDir := fs.String("policy-dir", DefaultPolicyDir, "")
	baseline := fs.Bool("baseline", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || (*from == "" && *kubeconfig == "") || (*baseline && *kubeconfig == "") {
		if err != nil {
			fmt.Fprintf(stderr, "plexusctl migrate: %v\n", err)
		} else if *baseline && *kubeconfig == "" {
			fmt.Fprintln(stderr, "plexusctl migrate: --baseline checks the cluster's pods: give --kubeconfig")
		}
		fmt.Fprint(stderr, usage)
		return codes.ExitUsage
	}
	a := runArgs{from: *from, kubeconfig: *kubeconfig, namespace: *namespace, configmap: *configmap, out: *out, policyDir: *policyDir, baseline: *baseline}
	if err := run(ctx, a, stdout); err != nil {
		fmt.Fprintf(stderr, "plexusctl migrate: %v\n", err)
		return codes.ExitFail
	}
	return codes.ExitOK
}

type runArgs struct {
	from, kubeconfig, namespace, configmap, out, policyDir string
	baseline                                               bool
}

func run(ctx context.Context, a runArgs, stdout io.Writer) error {
	var client kubernetes.Interface
	if a.kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", a.kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		if client, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	res, err := load(ctx, a, client)
	if err != nil {
		return err
	}
	if err := write(res, a.out, stdout); err != nil {
		return err
	}
	fmt.Fprint(stdout, res.Report())
	if client == nil {
		return nil
	}
	pods, err := ListPods(ctx, client)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, PodReport(res.AnalyzePods(pods), len(pods)))
	if !a.baseline {
		return nil
	}
	return baselineReport(ctx, res, pods, stdout)
}

// baselineReport prints what the baseline policy, as embedded in this
// binary, would refuse of each pod.
func baselineReport(ctx context.Context, res *Result, pods []corev1.Pod, stdout io.Writer) error {
	engine, err := policies.NewBaseline(ctx)
	if err != nil {
		return err
	}
	findings, err := res.BaselineFindings(ctx, engine, pods)
	if err != nil {
		return fmt.Errorf("baseline policy: %w", err)
	}
	fmt.Fprint(stdout, BaselineReport(findings, len(pods)))
	return nil
}

func load(ctx context.Context, a runArgs, client kubernetes.Interface) (*Result, error) {
	if a.from != "" {
		data, err := os.ReadFile(a.from)
		if err != nil {
			return nil, err
		}
		m, where, err := Read(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.from, err)
		}
		res, err := Convert(m, Options{PolicyDir: a.policyDir})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.from, err)
		}
		res.Source = a.from + where
		return res, nil
	}
	cm, err := client.CoreV1().ConfigMaps(a.namespace).Get(ctx, a.configmap, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the Multus ConfigMap: %w", err)
	}
	m, where, err := FromConfigMap(cm)
	if err != nil {
		return nil, err
	}
	res, err := Convert(m, Options{PolicyDir: a.policyDir})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	res.Source = where
	return res, nil
}

// write puts the config and policy in dir, or prints them.
func write(res *Result, dir string, stdout io.Writer) error {
	conf, err := res.ConfigJSON()
	if err != nil {
		return err
	}
	pol, err := res.PolicyYAML()
	if err != nil {
		return err
	}
	if dir == "" {
		fmt.Fprintf(stdout, "--- plexus.conf\n%s", conf)
		if pol != nil {
			fmt.Fprintf(stdout, "--- %s\n%s", PolicyDataFile, pol)
		}
		fmt.Fprintln(stdout, "---")
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "plexus.conf"), conf, 0o644); err != nil {
		return err
	}
	if pol != nil {
		return os.WriteFile(filepath.Join(dir, PolicyDataFile), pol, 0o644)
	}
	return nil
}
