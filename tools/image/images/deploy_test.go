package images

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// daemonSet is the part of deploy/'s DaemonSets this test reads.
type daemonSet struct {
	Spec struct {
		Template struct {
			Spec struct {
				InitContainers []container `yaml:"initContainers"`
				Containers     []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
}

// expand is arg with the container's env expanded, as kubelet expands
// $(NAME) in args.
func (c container) expand(arg string) string {
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		for k, prev := range env {
			v = strings.ReplaceAll(v, "$("+k+")", prev)
		}
		env[e.Name] = v
	}
	for k, v := range env {
		arg = strings.ReplaceAll(arg, "$("+k+")", v)
	}
	return arg
}

// TestDeployRunsTheImageMakeImageBuilds checks that every container of
// deploy/'s DaemonSets runs the image make image tags by default, and runs
// only binaries the image holds: importing bin/plexus-image.tar on a node
// is then enough for kubectl apply -k deploy/ (or deploy/thin).
func TestDeployRunsTheImageMakeImageBuilds(t *testing.T) {
	image := makeDefault(t, "IMAGE")
	for _, file := range []string{"deploy/daemonset.yaml", "deploy/thin/daemonset.yaml"} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(repoRoot(t), file))
			if err != nil {
				t.Fatal(err)
			}
			var ds daemonSet
			if err := yaml.Unmarshal(b, &ds); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			spec := ds.Spec.Template.Spec
			all := append(slices.Clone(spec.InitContainers), spec.Containers...)
			if len(all) == 0 {
				t.Fatalf("%s: no containers", file)
			}
			for _, c := range all {
				if c.Image != image {
					t.Errorf("container %s: image %q, want %q (mk/image.mk's IMAGE)", c.Name, c.Image, image)
				}
				checkRunsImageBinaries(t, c)
			}
		})
	}
}

// checkRunsImageBinaries checks that c's command is a binary of the image,
// as is every binary it is told to install from it.
func checkRunsImageBinaries(t *testing.T, c container) {
	t.Helper()
	if len(c.Command) == 0 {
		t.Errorf("container %s: no command (the image's entrypoint is for use by hand)", c.Name)
		return
	}
	if dir, bin := path.Split(c.Command[0]); dir != PlexusBinDir+"/" || !slices.Contains(PlexusBinaries, bin) {
		t.Errorf("container %s: command %q, want one of %v in %s", c.Name, c.Command[0], PlexusBinaries, PlexusBinDir)
	}
	for _, a := range append(slices.Clone(c.Command[1:]), c.Args...) {
		if v, ok := strings.CutPrefix(a, "--src-bin-dir="); ok && v != PlexusBinDir {
			t.Errorf("container %s: %s, want the image's %s", c.Name, a, PlexusBinDir)
		}
		if v, ok := strings.CutPrefix(a, "--binaries="); ok {
			for _, b := range strings.Split(v, ",") {
				if !slices.Contains(PlexusBinaries, b) {
					t.Errorf("container %s: installs %s, which the image does not hold (%v)", c.Name, b, PlexusBinaries)
				}
			}
		}
	}
}

// TestDeployLoadsTheImagesPolicy checks that the default install's policy
// is the image's rule library with the AttachmentPolicy "cluster", the
// baseline standing in until a revision is active: plexusd's ConfigMap
// names them where the image holds them, and thin mode's installer copies
// them from there to the host directory it keeps the revisions in.
func TestDeployLoadsTheImagesPolicy(t *testing.T) {
	root := repoRoot(t)
	policy, err := PolicyFiles(filepath.Join(root, "policies"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(policy, "baseline.yaml") || !slices.ContainsFunc(policy, func(p string) bool { return strings.HasPrefix(p, "library/") }) {
		t.Fatalf("the image's policy files %v lack the library or the baseline", policy)
	}

	t.Run("deploy/configmap.yaml", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, "deploy", "configmap.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		if err := yaml.Unmarshal(b, &cm); err != nil {
			t.Fatal(err)
		}
		var conf struct {
			Policy struct {
				Paths  []string `json:"paths"`
				Object struct {
					Name         string   `json:"name"`
					DefaultPaths []string `json:"defaultPaths"`
				} `json:"object"`
			} `json:"policy"`
		}
		if err := json.Unmarshal([]byte(cm.Data["plexusd.json"]), &conf); err != nil {
			t.Fatalf("plexusd.json: %v", err)
		}
		if got, want := conf.Policy.Paths, []string{PlexusPolicyDir + "/library"}; !slices.Equal(got, want) {
			t.Errorf("plexusd's policy paths %v, want the image's library %v", got, want)
		}
		if got, want := conf.Policy.Object.DefaultPaths, []string{PlexusPolicyDir + "/baseline.yaml"}; conf.Policy.Object.Name == "" || !slices.Equal(got, want) {
			t.Errorf("plexusd's policy object %q with defaults %v, want one with the image's baseline %v", conf.Policy.Object.Name, got, want)
		}
	})

	t.Run("deploy/thin/daemonset.yaml", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(root, "deploy", "thin", "daemonset.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var ds daemonSet
		if err := yaml.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		flags := map[string]string{}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				if k, v, ok := strings.Cut(c.expand(a), "="); ok {
					flags[k] = v
				}
			}
		}
		if src := flags["--policy-src-dir"]; src != PlexusPolicyDir {
			t.Errorf("--policy-src-dir=%q, want the image's %s", src, PlexusPolicyDir)
		}
		dir := flags["--policy-dir"]
		if !path.IsAbs(dir) {
			t.Fatalf("--policy-dir=%q: want the host directory the policy is copied to", dir)
		}
		// The installer names the library copy and the active revision in
		// the plugin's config; the baseline copy stands in until then.
		if flags["--policy-object"] == "" {
			t.Errorf("no --policy-object: the plugin would have no policy")
		}
		var conf struct {
			Policy *struct{} `json:"policy"`
		}
		if err := json.Unmarshal([]byte(flags["--config"]), &conf); err != nil {
			t.Fatalf("--config: %v", err)
		}
		if conf.Policy != nil {
			t.Errorf(`--config sets "policy": the installer writes it`)
		}
	})
}
