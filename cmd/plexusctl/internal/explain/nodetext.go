package explain

import (
	"cmp"
	"fmt"
	"strings"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
)

// textNodeState writes the node's PlexusNode: what its plexus installed
// and enforces, as it last reported.
func textNodeState(p *printer, n *Node) {
	s := n.State
	switch {
	case s == nil:
		return
	case s.Error != "":
		p.line(1, "PlexusNode %s: %s %s", n.Name, MarkWarning, s.Error)
		return
	case !s.Found:
		p.line(1, "PlexusNode %s: %s missing: plexus has not reported from this node (not running there, an older plexus, or its writes fail)", n.Name, MarkWarning)
		return
	}
	st := s.Status
	p.line(1, "PlexusNode %s: %s mode, version %s, updated %s", n.Name, st.Mode, st.Version, when(st.Updated))
	if s.Stale != "" {
		p.line(2, "%s stale: %s", MarkWarning, s.Stale)
	}
	if st.ConfigInstalled {
		p.line(2, "config installed: %s", st.ConfigPath)
	} else {
		p.line(2, "config: %s not installed (%s)", MarkProblem, st.ConfigPath)
	}
	if st.DefaultNetwork != "" || st.DefaultNetworkFile != "" {
		p.line(2, "default network: %s (%s)", st.DefaultNetwork, st.DefaultNetworkFile)
	} else {
		p.line(2, "default network: %s not found in the conf dir (s6.1.1)", MarkProblem)
	}
	textPlugins(p, s)
	textNodePolicy(p, st.Policy)
	for _, x := range st.Extensions {
		p.line(2, "%s", extensionLine(x))
	}
}

func textPlugins(p *printer, s *NodeState) {
	if len(s.Status.MissingPlugins) == 0 {
		p.line(2, "plugins: none missing from the bin dir (of those it checks: its default network's, plexus's own and, in thick mode, those its ADDs ran)")
		return
	}
	needed := map[string][]string{}
	for _, m := range s.MissingForPod {
		needed[m.Plugin] = m.Networks
	}
	for _, pl := range s.Status.MissingPlugins {
		if nets := needed[pl]; len(nets) > 0 {
			p.line(2, "plugin %s: %s missing, needed by %s", pl, MarkProblem, strings.Join(nets, ", "))
		} else {
			p.line(2, "plugin %s: %s missing (not one this pod's networks name)", pl, MarkWarning)
		}
	}
}

func textNodePolicy(p *printer, pol *plexusapi.NodePolicy) {
	switch {
	case pol == nil:
		p.line(2, "policy: not reported")
		return
	case pol.Error != "":
		p.line(2, "policy: %s, %s %s; %s", policySource(pol), MarkWarning, pol.Error, inForce(pol.Revision))
		return
	}
	s := row("policy: "+policySource(pol), "revision ", shortRevision(pol.Revision))
	if !pol.Since.IsZero() {
		s += " since " + when(pol.Since)
	}
	p.line(2, "%s", s)
}

func extensionLine(x plexusapi.NodeExtension) string {
	name := cmp.Or(x.Name, x.Path)
	if !x.Loaded {
		return fmt.Sprintf("extension %s (%s): %s failed to load: %s", name, x.Path, MarkWarning, x.Error)
	}
	return row(fmt.Sprintf("extension %s (%s): loaded", name, x.Path), "version ", x.Version)
}

// textNodePolicies writes what the node enforces of the object it
// follows.
func textNodePolicies(p *printer, n *Node) {
	f := n.Policy
	if f == nil || n.State == nil || n.State.Status == nil || n.State.Status.Policy == nil {
		return
	}
	pol := n.State.Status.Policy
	switch {
	case f.Error != "":
		p.line(1, "AttachmentPolicy %s: %s %s", f.Object, MarkWarning, f.Error)
	case f.Missing:
		p.line(1, "AttachmentPolicy %s: deleted; %s", f.Object, inForce(pol.Revision))
	case pol.Error != "":
		p.line(1, "AttachmentPolicy %s (generation %d): %s generation %d refused: %s; %s", f.Object, f.Generation, MarkWarning, pol.ObservedGeneration, pol.Error, inForce(pol.Revision))
	default:
		p.line(1, "AttachmentPolicy %s (generation %d): generation %d active since %s, revision %s, %d test(s) passed",
			f.Object, f.Generation, pol.Generation, when(pol.Since), shortRevision(pol.Revision), pol.TestsPassed)
	}
}
