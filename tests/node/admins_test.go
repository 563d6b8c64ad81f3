package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// TestAdminsWalkthrough runs docs/admins.md's steps on a node with each
// install, deploy/ (thick: plexusd follows the object) and deploy/thin
// (the installer does, for the plugin): the baseline lets a pod of team-a
// use a network of "default"; the admin pushes an edited baseline that
// allows no other namespace's networks, the node reports the revision
// active, a pod of team-a selecting default/shared is refused and
// `plexusctl explain pod` shows the denial; pushing the previous files
// back allows it again. After the strict files are pushed once more, an
// uninstall and a fresh `kubectl apply -k` leave the node enforcing the
// baseline, as a first install does, and its PlexusNode says so.
func TestAdminsWalkthrough(t *testing.T) {
	for _, mode := range []struct {
		name, kustomization, container, binary string
	}{
		{"Thick", "deploy", "plexusd", "plexus-shim"},
		{"Thin", "deploy/thin", "install", "plexus"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			node, d, world := deployNode(t, "node-admins-"+strings.ToLower(mode.name), mode.kustomization)
			if mode.name == "Thick" {
				d.ShareRuntimeSocket(t)
			}
			n := node.With(t)
			conf := filepath.Join(n.ConfDir, "00-plexus.conflist")
			installAwaitingDefault(t, n, d, world, mode.container, filepath.Join(n.cniBinDir, mode.binary), conf)
			adminsWalkthrough(t, node, d, world, mode.container)
		})
	}
}

func adminsWalkthrough(t *testing.T, node *Node, d *Deployment, world *harness.World, container string) {
	n := node.With(t)
	work := t.TempDir()
	kubeconfig := filepath.Join(work, "admin.kubeconfig")
	harness.Must(t, n.Env.Kubeconfig(kubeconfig, n.Env.AdminConfig()))
	// The commands run as an admin's shell would: in work, with KUBECONFIG.
	sh := func(name string, args ...string) (string, error) {
		var out bytes.Buffer
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	ctl := buildPlexusctl(t)

	harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, "default", "shared", world.BridgeNADConfig("shared")))
	harness.Must(t, n.Env.CreateNamespace(t.Context(), "team-a", nil))
	t.Run("BaselineAllowsDefaultsNetworks", func(t *testing.T) {
		n := node.With(t)
		n.RunPod("team-a", "before", "default/shared")
		n.DeletePod("team-a", "before")
	})

	// 1. Start from the image's baseline and tighten namespace isolation.
	harness.Must(t, os.Mkdir(filepath.Join(work, "policy"), 0o755))
	baseline, err := sh(ctl, "policy", "baseline")
	harness.Must(t, err)
	harness.Must(t, os.WriteFile(filepath.Join(work, "policy", "baseline.yaml"), []byte(baseline), 0o644))
	tighten := func(t *testing.T) {
		if out, err := sh("sed", "-i", `s/global_namespaces: \[default\]/global_namespaces: []/`, "policy/baseline.yaml"); err != nil {
			t.Fatalf("sed: %v\n%s", err, out)
		}
	}
	tighten(t)
	// push pushes the policy directory and returns the revision pushed.
	push := func(t *testing.T) string {
		out, err := sh(ctl, "policy", "push", "policy")
		if err != nil {
			t.Fatalf("plexusctl policy push: %v\n%s", err, out)
		}
		return revisionIn(t, out)
	}

	// 2. Push it; every node reports the revision it enforces.
	var strict string
	t.Run("PushActivatesOnTheNode", func(t *testing.T) {
		start := time.Now()
		strict = push(t)
		waitActive(t, n, d, strict)
		t.Logf("plexusctl policy push to %s's PlexusNode showing revision %s active: %s", n.Name, strict, time.Since(start).Round(time.Millisecond))
		// The node's PlexusNode names the revision too.
		d.waitFor(t, "PlexusNode "+n.Name+" naming revision "+strict, func(ctx context.Context) (bool, string) {
			pn, err := getPlexusNode(ctx, n.Dyn, n.Name)
			if err != nil {
				return false, err.Error()
			}
			if pn.Status.Policy == nil {
				return false, "no policy"
			}
			return pn.Status.Policy.Source == "object" && pn.Status.Policy.Revision == strict, fmt.Sprintf("%+v", *pn.Status.Policy)
		})
		if out, err := sh(ctl, "policy", "status"); err != nil || !strings.Contains(out, "1 nodes follow it: 1 enforce generation") || !strings.Contains(out, strict+"  1") {
			t.Errorf("plexusctl policy status: %v\n%s", err, out)
		}
	})
	if t.Failed() {
		return
	}

	// 3. A pod of team-a selecting default/shared is refused, and explain
	// says why.
	t.Run("DeniedPodAndItsExplanation", func(t *testing.T) {
		n := node.With(t)
		before := harness.HostVeths(t)
		n.CreatePod(n.PodSpec("team-a", "web", "default/shared"))
		_, err := n.waitRunning("team-a", "web")
		var se *SandboxError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "[namespace-isolation]") {
			t.Fatalf("pod team-a/web selecting default/shared: %v, want it refused by namespace-isolation", err)
		}
		// explain decides again with the object, and shows the pod's
		// events, the denial among them.
		out, _ := sh(ctl, "explain", "pod", "team-a/web")
		for _, want := range []string{
			"from AttachmentPolicy cluster, revision ",
			"[0] default/shared: PROBLEM denied: [namespace-isolation]",
			"denied by policy [namespace-isolation]",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("plexusctl explain pod team-a/web lacks %q:\n%s", want, out)
			}
		}
		n.DeletePod("team-a", "web")
		world.AssertNoLeaks(before)
	})

	// 4. Roll back: push the previous files again.
	t.Run("RollBack", func(t *testing.T) {
		n := node.With(t)
		baseline, err := sh(ctl, "policy", "baseline")
		harness.Must(t, err)
		harness.Must(t, os.WriteFile(filepath.Join(work, "policy", "baseline.yaml"), []byte(baseline), 0o644))
		rev := push(t)
		if rev == strict {
			t.Fatalf("the rollback's revision %s is the strict one's", rev)
		}
		waitActive(t, n, d, rev)
		n.RunPod("team-a", "after", "default/shared")
		n.DeletePod("team-a", "after")
	})
	if t.Failed() {
		return
	}

	// 5. Uninstall and install again: the node starts afresh.
	t.Run("ReinstallEnforcesTheBaseline", func(t *testing.T) {
		reinstallEnforcesTheBaseline(t, node.With(t), d, world, container, func() string {
			tighten(t)
			return push(t)
		})
	})
}

// reinstallEnforcesTheBaseline pushes strict (the policy directory in
// work), uninstalls as docs/install.md says, applies the same objects
// again and checks that the node enforces the baseline: its PlexusNode
// names the defaults (no revision), and a pod the strict revision refused
// runs.
func reinstallEnforcesTheBaseline(t *testing.T, n *Node, d *Deployment, world *harness.World, container string, push func() string) {
	t.Helper()
	waitActive(t, n, d, push())
	conf := filepath.Join(n.ConfDir, "00-plexus.conflist")
	uninstallDeploy(t, d, container, conf)
	d.WaitFile(t, conf, false)
	waitCRDsGone(t, n, d)
	d.Apply(t)
	d.WaitPod(t, deployImage)
	d.WaitFile(t, conf, true)
	waitLoaded(t, n, d, PlexusNetwork)
	d.waitFor(t, "PlexusNode "+n.Name+" reporting the baseline in force", func(ctx context.Context) (bool, string) {
		pn, err := getPlexusNode(ctx, n.Dyn, n.Name)
		if err != nil {
			return false, err.Error()
		}
		p := pn.Status.Policy
		if p == nil {
			return false, "no policy reported"
		}
		return p.Object == "cluster" && p.Revision == "defaults" && p.Generation == 0, fmt.Sprintf("%+v", *p)
	})
	// The uninstall deleted the NAD CRD, and the NADs with it.
	harness.Must(t, kubeenv.CreateNAD(t.Context(), n.Dyn, "default", "shared", world.BridgeNADConfig("shared")))
	n.RunPod("team-a", "reinstalled", "default/shared")
	n.DeletePod("team-a", "reinstalled")
}

// waitCRDsGone waits until the CRDs the deployment applied are deleted,
// so that applying them again creates them afresh.
func waitCRDsGone(t *testing.T, n *Node, d *Deployment) {
	t.Helper()
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, obj := range d.Objects {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		d.waitFor(t, "CRD "+obj.GetName()+" deleted", func(ctx context.Context) (bool, string) {
			_, err := n.Dyn.Resource(crds).Get(ctx, obj.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
}

var pushedRevisionLine = regexp.MustCompile(`AttachmentPolicy cluster: revision ([0-9]+-[0-9a-f]{12})`)

func revisionIn(t *testing.T, out string) string {
	t.Helper()
	m := pushedRevisionLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("push printed no revision:\n%s", out)
	}
	return m[1]
}

// waitActive waits until the node's PlexusNode shows rev of the
// AttachmentPolicy "cluster" active.
func waitActive(t *testing.T, n *Node, d *Deployment, rev string) {
	t.Helper()
	d.waitFor(t, "node "+n.Name+" reporting revision "+rev+" active", func(ctx context.Context) (bool, string) {
		pn, err := getPlexusNode(ctx, n.Dyn, n.Name)
		if err != nil {
			return false, err.Error()
		}
		p := pn.Status.Policy
		if p == nil {
			return false, "no policy reported"
		}
		return p.Object == "cluster" && p.Revision == rev, "policy: " + p.Revision + " " + p.Error
	})
}

// buildPlexusctl builds the admin's tool from this tree: the one in
// PLEXUS_BIN may predate it.
func buildPlexusctl(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plexusctl")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "./cmd/plexusctl")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building plexusctl: %v\n%s", err, b)
	}
	return out
}
