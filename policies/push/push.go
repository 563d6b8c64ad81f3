// Package push is "plexusctl policy push" and "status": it verifies a
// directory of policy files as a node will and creates or updates the
// AttachmentPolicy, and it sums up what the nodes say they enforce.
package push

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Read reads dir's .rego modules and .json/.yaml/.yml data files, not its
// subdirectories, into an object's spec, and returns the files as a node
// reads them (revision.SpecFiles). Other files (a README) are skipped.
func Read(dir string) (plexusapi.AttachmentPolicySpec, map[string][]byte, error) {
	var spec plexusapi.AttachmentPolicySpec
	entries, err := os.ReadDir(dir)
	if err != nil {
		return spec, nil, fmt.Errorf("policy directory: %w", err)
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
			return spec, nil, fmt.Errorf("policy directory %s: more than %d files", dir, 2*revision.MaxFiles)
		}
		b, err := readBounded(filepath.Join(dir, name))
		if err != nil {
			return spec, nil, err
		}
		target[name] = string(b)
	}
	if len(spec.Modules)+len(spec.Data) == 0 {
		return spec, nil, fmt.Errorf("policy directory %s: no .rego, .json, .yaml or .yml files", dir)
	}
	// The checks a node makes; the revision's generation does not matter here.
	files, err := revision.SpecFiles(&plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: "push"}, Spec: spec})
	if err != nil {
		return spec, nil, fmt.Errorf("policy directory %s: %w", dir, err)
	}
	return spec, files, nil
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

// Verify checks an object's files (revision.SpecFiles) as a node will,
// with the rule library at library, or the built-in one when library is
// "": every file compiles, its tests pass, a sample decision finishes in
// time. Its errors call the files' directory dirName. It returns the
// engine (explain decides with it) and the number of tests passed.
func Verify(ctx context.Context, library string, files map[string][]byte, dirName string) (*policies.Engine, int, error) {
	tmp, err := os.MkdirTemp("", "plexus-push-")
	if err != nil {
		return nil, 0, err
	}
	// The engine keeps nothing of the files once compiled.
	defer os.RemoveAll(tmp)
	if library == "" {
		if library, _, err = policies.WriteBaseline(filepath.Join(tmp, "builtin")); err != nil {
			return nil, 0, fmt.Errorf("unpacking the built-in library: %w", err)
		}
	}
	dir := filepath.Join(tmp, "policy")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, 0, err
	}
	for name, b := range files {
		// SpecFiles allows plain file names only.
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, 0, err
		}
	}
	e, passed, err := revision.Verify(ctx, policies.Config{Paths: []string{library}}, dir, revision.HasTests(files), 30*time.Second)
	if err != nil {
		return nil, 0, errors.New(revision.StripDir(err.Error(), dir, dirName))
	}
	return e, passed, nil
}

// Push creates the object named name with spec, or updates its spec
// optimistically, and returns the revision nodes will report for it.
func Push(ctx context.Context, cs versioned.Interface, name string, spec plexusapi.AttachmentPolicySpec) (string, error) {
	api := cs.PlexusV1alpha1().AttachmentPolicies()
	p, err := api.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p = &plexusapi.AttachmentPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		if p, err = api.Create(ctx, p, metav1.CreateOptions{FieldManager: "plexusctl"}); err != nil {
			return "", fmt.Errorf("creating AttachmentPolicy %s: %w", name, err)
		}
	case err != nil:
		return "", fmt.Errorf("reading AttachmentPolicy %s: %w", name, err)
	default:
		p.Spec = spec
		if p, err = api.Update(ctx, p, metav1.UpdateOptions{FieldManager: "plexusctl"}); err != nil {
			return "", fmt.Errorf("updating AttachmentPolicy %s: %w", name, err)
		}
	}
	files, err := revision.SpecFiles(p)
	if err != nil {
		return "", err
	}
	return revision.Revision(p.Generation, files), nil
}

// Status writes the object's revision and how many nodes enforce it,
// from the nodes' PlexusNodes, read in pages.
func Status(ctx context.Context, cs versioned.Interface, name string, w io.Writer) error {
	p, err := cs.PlexusV1alpha1().AttachmentPolicies().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading AttachmentPolicy %s: %w", name, err)
	}
	var want string
	if files, err := revision.SpecFiles(p); err != nil {
		want = "(invalid: " + err.Error() + ")"
	} else {
		want = revision.Revision(p.Generation, files)
	}
	fmt.Fprintf(w, "AttachmentPolicy %s: generation %d, revision %s, onDelete %s\n", name, p.Generation, want, cmp.Or(p.Spec.OnDelete, plexusapi.OnDeleteKeep))
	sum := NewSummary(p)
	// A fleet's PlexusNodes arrive in pages, never in one response.
	opts := metav1.ListOptions{Limit: 500}
	for {
		l, err := cs.PlexusV1alpha1().PlexusNodes().List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing PlexusNodes: %w", err)
		}
		for i := range l.Items {
			sum.Add(&l.Items[i])
		}
		if l.Continue == "" {
			return sum.Write(w)
		}
		opts.Continue = l.Continue
	}
}

// Summary counts what a fleet's nodes enforce of one AttachmentPolicy.
type Summary struct {
	policy *plexusapi.AttachmentPolicy
	// Revisions counts the nodes following the object by the revision
	// they enforce.
	Revisions map[string]int
	// Current counts the nodes that enforce the object's generation.
	Current int
	// Refused are the nodes that tried the object's generation and keep
	// an older revision, with why; Behind are the nodes that have not yet
	// tried it; Other are nodes that follow another object or none.
	Refused, Behind, Other []NodeNote
}

// NodeNote is one node and what the summary says of it.
type NodeNote struct{ Node, Note string }

// NewSummary starts a summary of p.
func NewSummary(p *plexusapi.AttachmentPolicy) *Summary {
	return &Summary{policy: p, Revisions: map[string]int{}}
}

// Add counts one node.
func (s *Summary) Add(n *plexusapi.PlexusNode) {
	pol := n.Status.Policy
	switch {
	case pol == nil:
		s.Other = append(s.Other, NodeNote{n.Name, "reports no policy"})
		return
	case pol.Source == "object" && pol.Object != s.policy.Name:
		s.Other = append(s.Other, NodeNote{n.Name, "follows AttachmentPolicy " + pol.Object})
		return
	case pol.Source != "object":
		s.Other = append(s.Other, NodeNote{n.Name, "enforces its " + pol.Source + " policy"})
		return
	}
	s.Revisions[pol.Revision]++
	gen := s.policy.Generation
	switch {
	case pol.Generation == gen && pol.Error == "":
		s.Current++
	case pol.ObservedGeneration >= gen && pol.Error != "":
		first, _, _ := strings.Cut(pol.Error, "\n")
		s.Refused = append(s.Refused, NodeNote{n.Name, first})
	default:
		s.Behind = append(s.Behind, NodeNote{n.Name, fmt.Sprintf("enforces generation %d, tried %d", pol.Generation, pol.ObservedGeneration)})
	}
}

// maxListed bounds the nodes named per group: a fleet's summary stays
// readable, and the counts say how many there are.
const maxListed = 20

// Write prints the summary.
func (s *Summary) Write(w io.Writer) error {
	following := s.Current + len(s.Refused) + len(s.Behind)
	fmt.Fprintf(w, "%d nodes follow it: %d enforce generation %d, %d refused it, %d have not tried it yet\n",
		following, s.Current, s.policy.Generation, len(s.Refused), len(s.Behind))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tNODES")
	for _, rev := range slices.Sorted(maps.Keys(s.Revisions)) {
		fmt.Fprintf(tw, "%s\t%d\n", rev, s.Revisions[rev])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeNotes(w, "refused", s.Refused)
	writeNotes(w, "not yet tried", s.Behind)
	writeNotes(w, "not following it", s.Other)
	return nil
}

func writeNotes(w io.Writer, title string, notes []NodeNote) {
	if len(notes) == 0 {
		return
	}
	slices.SortFunc(notes, func(a, b NodeNote) int { return strings.Compare(a.Node, b.Node) })
	fmt.Fprintf(w, "%s (%d):\n", title, len(notes))
	for _, n := range notes[:min(len(notes), maxListed)] {
		fmt.Fprintf(w, "  %s: %s\n", n.Node, n.Note)
	}
	if len(notes) > maxListed {
		fmt.Fprintf(w, "  and %d more\n", len(notes)-maxListed)
	}
}
