package push

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

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
