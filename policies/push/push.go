// Package push is "plexusctl policy push" and "status": it reads a
// directory of Rego modules and data files, verifies them as a node will
// (revision.Verify), and creates or updates the AttachmentPolicy nodes
// follow; and it reads back what each node enforces.
package push

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Read reads dir's .rego modules and .json/.yaml/.yml data files, not its
// subdirectories, into an object's spec. A policy file whose name an
// object may not hold is an error; other files (a README) are skipped.
func Read(dir string) (plexusapi.AttachmentPolicySpec, error) {
	var spec plexusapi.AttachmentPolicySpec
	entries, err := os.ReadDir(dir)
	if err != nil {
		return spec, fmt.Errorf("policy directory: %w", err)
	}
	spec.Modules, spec.Data = map[string]string{}, map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		target := spec.Data
		switch strings.ToLower(filepath.Ext(name)) {
		case ".rego":
			target = spec.Modules
		case ".json", ".yaml", ".yml":
		default:
			continue
		}
		if len(spec.Modules)+len(spec.Data) >= 2*revision.MaxFiles {
			return spec, fmt.Errorf("policy directory %s: more than %d files", dir, 2*revision.MaxFiles)
		}
		b, err := readBounded(filepath.Join(dir, name))
		if err != nil {
			return spec, err
		}
		target[name] = string(b)
	}
	if len(spec.Modules)+len(spec.Data) == 0 {
		return spec, fmt.Errorf("policy directory %s: no .rego, .json, .yaml or .yml files", dir)
	}
	// The checks a node makes; the revision's generation does not matter here.
	if _, err := revision.SpecFiles(&plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "push"}, Spec: spec}); err != nil {
		return spec, fmt.Errorf("policy directory %s: %w", dir, err)
	}
	return spec, nil
}

func readBounded(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Size() > revision.MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", path, info.Size(), revision.MaxFileBytes)
	}
	return os.ReadFile(path)
}

// Verify checks spec as a node will, with the rule library at library:
// every file compiles, its tests pass, a sample decision finishes within
// the default deadline. It returns the number of tests passed.
func Verify(ctx context.Context, library string, spec plexusapi.AttachmentPolicySpec) (int, error) {
	files, err := revision.SpecFiles(&plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "push"}, Spec: spec})
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "plexus-push-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return 0, err
		}
	}
	_, passed, err := revision.Verify(ctx, policies.Config{Paths: []string{library}}, dir, revision.HasTests(files), 30*time.Second)
	if err != nil {
		return 0, strippedError{revision.StripDir(err.Error(), dir, "(the directory)")}
	}
	return passed, nil
}

type strippedError struct{ msg string }

func (e strippedError) Error() string { return e.msg }

// Push creates the object named name with spec, or updates its spec
// (optimistically: the update names the version read). It returns the
// revision nodes will report for it.
func Push(ctx context.Context, dyn dynamic.Interface, name string, spec plexusapi.AttachmentPolicySpec) (string, error) {
	ri := dyn.Resource(plexusapi.AttachmentPolicies)
	cur, err := ri.Get(ctx, name, metav1.GetOptions{})
	var p plexusapi.AttachmentPolicy
	switch {
	case apierrors.IsNotFound(err):
		p = plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		u, err := plexusapi.ToUnstructured(&p)
		if err != nil {
			return "", err
		}
		delete(u.Object, "status")
		if cur, err = ri.Create(ctx, u, metav1.CreateOptions{FieldManager: "plexusctl"}); err != nil {
			return "", fmt.Errorf("creating AttachmentPolicy %s: %w", name, err)
		}
	case err != nil:
		return "", fmt.Errorf("reading AttachmentPolicy %s: %w", name, err)
	default:
		if err := plexusapi.FromUnstructured(cur, &p); err != nil {
			return "", err
		}
		p.Spec = spec
		u, err := plexusapi.ToUnstructured(&p)
		if err != nil {
			return "", err
		}
		delete(u.Object, "status")
		if cur, err = ri.Update(ctx, u, metav1.UpdateOptions{FieldManager: "plexusctl"}); err != nil {
			return "", fmt.Errorf("updating AttachmentPolicy %s: %w", name, err)
		}
	}
	files, err := revision.SpecFiles(&p)
	if err != nil {
		return "", err
	}
	return revision.Revision(cur.GetGeneration(), files), nil
}

// Status writes the object's nodes and what each enforces.
func Status(ctx context.Context, dyn dynamic.Interface, name string, w io.Writer) error {
	u, err := dyn.Resource(plexusapi.AttachmentPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading AttachmentPolicy %s: %w", name, err)
	}
	var p plexusapi.AttachmentPolicy
	if err := plexusapi.FromUnstructured(u, &p); err != nil {
		return err
	}
	files, err := revision.SpecFiles(&p)
	want := "(invalid: " + fmtErr(err) + ")"
	if err == nil {
		want = revision.Revision(p.Generation, files)
	}
	fmt.Fprintf(w, "AttachmentPolicy %s: generation %d, revision %s, onDelete %s\n", name, p.Generation, want, orKeep(p.Spec.OnDelete))
	nodes := append([]plexusapi.NodePolicyStatus(nil), p.Status.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tACTIVE\tSINCE\tOBSERVED\tTESTS\tERROR")
	for _, n := range nodes {
		since := ""
		if !n.ActiveSince.IsZero() {
			since = n.ActiveSince.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", n.Node, n.ActiveRevision, since, n.ObservedGeneration, n.TestsPassed, firstLine(n.Error))
	}
	return tw.Flush()
}

func orKeep(s string) string {
	if s == "" {
		return plexusapi.OnDeleteKeep
	}
	return s
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
