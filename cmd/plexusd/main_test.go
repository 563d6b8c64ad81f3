package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func TestParseFlagsRefusesStrayArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string // "": accepted
	}{
		{[]string{"--cni-bin-dir=/opt/cni/bin"}, ""},
		{[]string{"--cni-bin-dir", "/opt/cni/bin", "--readiness", "wait"}, ""},
		{[]string{"--readiness=wait", "/opt/cni/bin"}, `unexpected argument "/opt/cni/bin"`},
		{[]string{"--uninstall", "true"}, `unexpected argument "true"`},
		{[]string{"--readiness=later"}, `--readiness "later"`},
	} {
		_, err := parseFlags(tc.args)
		if tc.err == "" && err != nil {
			t.Errorf("%q: %v", tc.args, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: err = %v, want one with %q", tc.args, err, tc.err)
		}
	}
}

// deploy/'s plexusd command line parses, with its env expanded as kubelet
// expands $(NAME), and gives plexusd the node's paths from the env.
func TestDeployArgsParse(t *testing.T) {
	data, err := os.ReadFile("../../deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "plexusd" {
			continue
		}
		env := map[string]string{}
		expand := func(s string) string {
			for k, v := range env {
				s = strings.ReplaceAll(s, "$("+k+")", v)
			}
			return s
		}
		for _, e := range c.Env {
			env[e.Name] = expand(e.Value)
		}
		args := make([]string, len(c.Args))
		for i, a := range c.Args {
			args[i] = expand(a)
		}
		o, err := parseFlags(args)
		if err != nil {
			t.Fatalf("plexusd %v: %v", args, err)
		}
		if !o.ConfDirSet || !o.BinDirSet || o.DefaultConfDir != env["CNI_CONF_DIR"] || o.BinDir != env["CNI_BIN_DIR"] || o.CRISocket != env["CRI_SOCKET"] {
			t.Errorf("the node's paths did not come from the env %v: %+v", env, o)
		}
		if !slices.Equal(o.Binaries, []string{"plexus", "plexus-shim"}) {
			t.Errorf("binaries %v, want plexus and plexus-shim", o.Binaries)
		}
		return
	}
	t.Fatal("no plexusd container in deploy/daemonset.yaml")
}
