package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/policies"
)

// Args say what "plexusctl migrate" reads and writes; the command line
// fills them.
type Args struct {
	// From is a Multus config file; empty reads the ConfigMap
	// Namespace/ConfigMap through the client instead.
	From                 string
	Namespace, ConfigMap string
	// Out is where plexus.conf and the policy data go; empty prints them.
	Out       string
	PolicyDir string
	// Baseline also reports what the baseline policy would refuse of the
	// cluster's pods.
	Baseline bool
}

// Validate says what a lacks to run, with a cluster or without one; the
// command line refuses it before connecting.
func (a Args) Validate(cluster bool) error {
	switch {
	case a.From == "" && !cluster:
		return errors.New("no Multus config: give --from FILE, or a cluster to read the ConfigMap from")
	case a.Baseline && !cluster:
		return errors.New("--baseline checks the cluster's pods: give --kubeconfig")
	}
	return nil
}

// Run is "plexusctl migrate": client, when not nil, is the cluster whose
// ConfigMap (unless a.From is given) and pods are read.
func Run(ctx context.Context, a Args, client kubernetes.Interface, stdout io.Writer) error {
	if err := a.Validate(client != nil); err != nil {
		return err
	}
	res, err := load(ctx, a, client)
	if err != nil {
		return err
	}
	if err := write(res, a.Out, stdout); err != nil {
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
	if !a.Baseline {
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

func load(ctx context.Context, a Args, client kubernetes.Interface) (*Result, error) {
	var m map[string]json.RawMessage
	var where string // where the Multus config was found
	if a.From != "" {
		data, err := os.ReadFile(a.From)
		if err != nil {
			return nil, err
		}
		if m, where, err = Read(data); err != nil {
			return nil, fmt.Errorf("%s: %w", a.From, err)
		}
		where = a.From + where
	} else {
		cm, err := client.CoreV1().ConfigMaps(a.Namespace).Get(ctx, a.ConfigMap, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the Multus ConfigMap: %w", err)
		}
		if m, where, err = FromConfigMap(cm); err != nil {
			return nil, err
		}
	}
	res, err := Convert(m, a.PolicyDir)
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
