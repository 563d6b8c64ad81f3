package explain

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plexus-cni/plexus/core/selection"
	"github.com/plexus-cni/plexus/core/status"
)

// Markers start the lines of findings that matter, for grep.
const (
	MarkProblem = "PROBLEM"
	MarkWarning = "warning"
)

type printer struct {
	w   io.Writer
	err error
}

// line writes one line, made printable: values come from pod authors and
// nodes, and a control sequence in one must not drive the admin's terminal.
func (p *printer) line(indent int, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", indent), Printable(fmt.Sprintf(format, args...)))
}

func (p *printer) section(format string, args ...any) {
	p.line(0, "")
	p.line(0, format, args...)
}

// Printable escapes, as Go quotes them (\x1b, \u202e), what a terminal
// would act on rather than show: control characters, Unicode's format
// characters (bidirectional, zero-width) and invalid UTF-8.
func Printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// WriteText writes the report for people: one section per question, one
// line per finding, problems marked PROBLEM.
func WriteText(w io.Writer, r *Report) error {
	p := &printer{w: w}
	textPod(p, r)
	p.line(0, "Node settings (from %s): %s", r.Settings.From, describeSettings(&r.Settings.NodeSettings))
	running := r.Pod.Phase == "Running"
	if running {
		// What the last ADD did is the news for a running pod.
		textLastAdd(p, r)
	}
	textSelection(p, r)
	textDefaultNetwork(p, r)
	textNetworks(p, r)
	textPolicy(p, r)
	textExtensions(p, r)
	if !running {
		textLastAdd(p, r)
	}
	textNode(p, r)
	textResult(p, r)
	return p.err
}

func textPod(p *printer, r *Report) {
	from := "read from the cluster"
	if r.Pod.From != "cluster" {
		from = "from manifest " + r.Pod.From
	}
	phase := r.Pod.Phase + onlyIf(r.Pod.Started != "", " since "+r.Pod.Started)
	detail := strings.TrimPrefix(row("", "uid ", r.Pod.UID, "node ", r.Pod.NodeName, "", phase), ", ")
	if detail != "" {
		detail = " (" + detail + ")"
	}
	p.line(0, "Pod %s/%s%s, %s", r.Pod.Namespace, r.Pod.Name, detail, from)
}

func textSelection(p *printer, r *Report) {
	a := r.Annotation
	p.section("Selection: %s (s4.1)", selection.Annotation)
	if !a.Present {
		p.line(1, "not set: the pod asks for no secondary network")
		return
	}
	p.line(1, "value: %s", a.Value)
	if !a.Valid {
		where := "the annotation as a whole"
		if a.ErrorElement != nil {
			where = fmt.Sprintf("element %d", *a.ErrorElement)
		}
		p.line(1, "%s invalid (in %s): %s", MarkProblem, where, a.Error)
		p.line(1, "%s", a.Consequence)
		return
	}
	p.line(1, "format %s, %d element(s)", a.Format, len(r.Attachments))
	for _, at := range r.Attachments {
		textElement(p, at)
	}
	for _, w := range a.Warnings {
		p.line(1, "%s %s", MarkWarning, w)
	}
}

func textElement(p *printer, a Attachment) {
	how := "generated"
	if a.InterfaceRequested {
		how = "requested"
	}
	p.line(1, "%s", row(fmt.Sprintf("[%d] %s on %s (%s)", a.Index, a.Network, a.Interface, how), "", list("ips ", a.IPs, " "),
		"mac ", a.MAC, "deviceID ", a.DeviceID, "infiniband-guid ", a.InfinibandGUID, "compat keys ", compatKeys(a.Compat),
		"", onlyIf(len(a.Keys) > 0, fmt.Sprintf("%d reverse-domain key(s)", len(a.Keys)))))
	for _, k := range slices.Sorted(maps.Keys(a.Ignored)) {
		p.line(2, "key %q ignored: %s", k, a.Ignored[k])
	}
}

// row joins head and each non-empty value, after its label, with ", ".
func row(head string, labelsAndValues ...string) string {
	out := []string{head}
	for i := 0; i+1 < len(labelsAndValues); i += 2 {
		if v := labelsAndValues[i+1]; v != "" {
			out = append(out, labelsAndValues[i]+v)
		}
	}
	return strings.Join(out, ", ")
}

// onlyIf is s when cond holds, else "".
func onlyIf(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// list is label and l's items joined with sep, "" when l is empty.
func list(label string, l []string, sep string) string {
	if len(l) == 0 {
		return ""
	}
	return label + strings.Join(l, sep)
}

func compatKeys(c *selection.Compat) string {
	if c == nil {
		return ""
	}
	ks := []string{
		onlyIf(len(c.DefaultRoute) > 0, selection.KeyDefaultRoute), onlyIf(len(c.CNIArgs) > 0, selection.KeyCNIArgs),
		onlyIf(c.PortMappings != nil, selection.KeyPortMappings), onlyIf(c.Bandwidth != nil, selection.KeyBandwidth),
	}
	return strings.Join(slices.DeleteFunc(ks, func(k string) bool { return k == "" }), " ")
}

func textDefaultNetwork(p *printer, r *Report) {
	p.section("Default network: %s", selection.DefaultNetworkAnnotation)
	d := r.DefaultNetwork
	if d == nil {
		p.line(1, "not set: the cluster-wide default network (s6)")
		return
	}
	p.line(1, "value: %s", d.Value)
	switch {
	case d.Ignored != "":
		p.line(1, "%s ignored: %s", MarkWarning, d.Ignored)
	case d.Error != "":
		p.line(1, "%s %s: the ADD fails", MarkProblem, d.Error)
	default:
		p.line(1, "%s", nadLine("default "+d.Network, d.NAD))
	}
}

func textNetworks(p *printer, r *Report) {
	p.section("Networks (s3.4)")
	for _, a := range r.DefaultNetworks {
		p.line(1, "%s", nadLine(fmt.Sprintf("defaultNetworks %s on %s", a.Network, a.Interface), &a.NAD))
	}
	if len(r.Attachments) == 0 {
		p.line(1, "none asked for")
	}
	for _, a := range r.Attachments {
		p.line(1, "%s", nadLine(fmt.Sprintf("[%d] %s", a.Index, a.Network), &a.NAD))
		if d := deviceLine(&a.NAD); d != "" {
			p.line(2, "%s", d)
		}
	}
}

func nadLine(label string, n *NAD) string {
	switch {
	case n == nil:
		return label + ": not read"
	case n.Error != "":
		return fmt.Sprintf("%s: %s %s", label, MarkProblem, n.Error)
	case n.ConfigSource == "node":
		return fmt.Sprintf("%s: found (%s); %s no spec.config: the node's conf dir decides (s3.4.1), not checked here", label, n.From, MarkWarning)
	}
	return row(fmt.Sprintf("%s: found (%s), config from %s is valid: plugins %s", label, n.From, n.ConfigSource, strings.Join(n.PluginTypes, ", ")),
		"", list("ipam ", n.IPAMTypes, ", "), "cniVersion ", n.CNIVersion)
}

func deviceLine(n *NAD) string {
	var s string
	switch {
	case n.ResourceName != "":
		s = "needs a device of resource " + n.ResourceName
	case n.ResourceClaim != "":
		s = "needs a device of the pod's resource claim " + n.ResourceClaim
	}
	if n.DeviceError != "" {
		s = strings.TrimPrefix(s+"; ", "; ") + MarkProblem + " " + n.DeviceError
	}
	return s
}

func textPolicy(p *printer, r *Report) {
	p.section("Policy (s7.4)")
	switch {
	case !r.Policy.Given:
		p.line(1, "%s", r.Policy.Note)
		return
	case r.Policy.Error != "":
		p.line(1, "%s %s", MarkProblem, r.Policy.Error)
		return
	case r.Policy.Object != "" && r.Policy.Revision != "":
		p.line(1, "from AttachmentPolicy %s, revision %s, with the rule library", r.Policy.Object, r.Policy.Revision)
	case r.Policy.Object != "":
		p.line(1, "%s", r.Policy.Note)
	default:
		p.line(1, "from %s", strings.Join(r.Policy.Paths, ", "))
	}
	if d := r.DefaultNetwork; d != nil && d.Policy != nil {
		p.line(1, "%s", decisionLine("default "+d.Network, d.Policy))
	}
	for _, a := range r.Attachments {
		p.line(1, "%s", decisionLine(fmt.Sprintf("[%d] %s", a.Index, a.Network), a.Policy))
	}
}

func decisionLine(label string, d *Decision) string {
	switch {
	case d == nil:
		return label + ": not asked"
	case !d.Evaluated && d.Note != "":
		return fmt.Sprintf("%s: %s", label, d.Note)
	case d.Allowed:
		return label + ": allowed"
	}
	rs := make([]string, len(d.Reasons))
	for i, r := range d.Reasons {
		rs[i] = fmt.Sprintf("[%s] %s", r.Code, r.Message)
	}
	return fmt.Sprintf("%s: %s denied: %s", label, MarkProblem, strings.Join(rs, "; "))
}

func textExtensions(p *printer, r *Report) {
	p.section("Extensions (s4.1.2.1)")
	x := r.Extensions
	switch {
	case !x.Given:
		p.line(1, "no extensions config given (--extensions)")
	case x.Error != "":
		p.line(1, "%s %s", MarkProblem, x.Error)
	default:
		p.line(1, "config %s, unownedKeys %s", x.File, x.UnownedKeys)
		for _, m := range x.Modules {
			p.line(1, "module %q (%s): prefixes %s, hooks %s", m.Name, m.Path, strings.Join(m.Prefixes, " "), strings.Join(m.Hooks, " "))
		}
	}
	n := 0
	for _, a := range r.Attachments {
		for _, k := range a.Keys {
			mark := onlyIf(k.Module == "", MarkWarning+" ")
			if k.Module == "" && strings.Contains(k.Outcome, "ADD fails") {
				mark = MarkProblem + " "
			}
			p.line(1, "[%d] %s: %s%s", a.Index, k.Key, mark, k.Outcome)
			n++
		}
	}
	if n == 0 {
		p.line(1, "no reverse-domain keys in the selection")
	}
}

func textLastAdd(p *printer, r *Report) {
	l := r.LastAdd
	if l == nil {
		return
	}
	p.section("Last ADD")
	switch {
	case !l.StatusPresent:
		p.line(1, "%s: not set (no ADD has published status yet)", status.Annotation)
	case l.StatusError != "":
		p.line(1, "%s: %s %s", status.Annotation, MarkWarning, l.StatusError)
	default:
		p.line(1, "%s (s5):", status.Annotation)
		for _, e := range l.Status {
			p.line(2, "%s", row(e.Name+onlyIf(e.Interface != "", " on "+e.Interface), "", list("ips ", e.IPs, " "), "mac ", e.MAC, "", onlyIf(e.Default, "default")))
		}
	}
	if r.Pod.From != "cluster" {
		return
	}
	switch c := l.Condition; {
	case c == nil:
		p.line(1, "condition %s: not set (plexusd has not changed the running pod's attachments)", ConditionType)
	default:
		p.line(1, "condition %s: %s%s, %s: %s", ConditionType, onlyIf(c.Status == "False", MarkProblem+" "), c.Status, c.Reason, c.Message)
	}
	switch {
	case l.EventsError != "":
		p.line(1, "events: %s %s", MarkWarning, l.EventsError)
		return
	case len(l.Events) == 0:
		p.line(1, "events: none")
		return
	}
	p.line(1, "events (warnings first, newest first):")
	for _, e := range l.Events {
		from := onlyIf(e.OtherNode != "", fmt.Sprintf(" %s from node %s, not the pod's", MarkWarning, e.OtherNode)) +
			onlyIf(e.Old, " old: before the pod started")
		p.line(2, "%s %s (%s, %s)%s: %s", e.Type, e.Reason, e.Source, e.LastTime, from, e.Message)
	}
}

func textNode(p *printer, r *Report) {
	n := r.Node
	if n == nil {
		return
	}
	p.section("Node %s", n.Name)
	if n.Error != "" {
		p.line(1, "%s %s", MarkWarning, n.Error)
	} else if len(n.Pods) == 0 {
		p.line(1, "%s no plexus pod in %s on this node", MarkProblem, PlexusNamespace)
	}
	for _, pod := range n.Pods {
		ready := "ready"
		if !pod.Ready {
			ready = MarkProblem + " not ready"
		}
		p.line(1, "%s/%s: %s, %s, %d restart(s)", PlexusNamespace, pod.Name, pod.Phase, ready, pod.Restarts)
	}
	textNodeState(p, n)
	textNodePolicies(p, n)
	p.line(1, "not available yet (they need the node, not the API):")
	for _, u := range n.Unavailable {
		p.line(2, "%s", u)
	}
}

func textResult(p *printer, r *Report) {
	p.line(0, "")
	if r.Add.Fails {
		p.line(0, "ADD: fails before any delegate runs, with CNI error %d: %s", r.Add.Code, r.Add.Message)
	} else {
		p.line(0, "ADD: attaches %s", strings.Join(r.Add.Interfaces, ", "))
	}
	if r.OK {
		p.line(0, "Result: ok, the pod would get every network it asks for (%d warning(s))", len(r.Warnings))
	} else {
		p.line(0, "Result: %d problem(s): the pod would not get every network it asks for", len(r.Problems))
	}
	for _, s := range r.Problems {
		p.line(1, "%s %s", MarkProblem, s)
	}
	for _, s := range r.Warnings {
		p.line(1, "%s %s", MarkWarning, s)
	}
}

// textNodeState writes what the node's plexus last reported of itself.
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
	switch pol := st.Policy; {
	case pol == nil:
		p.line(2, "policy: not reported")
	case pol.Error != "":
		p.line(2, "policy: %s, %s %s; %s", policySource(pol), MarkWarning, pol.Error, inForce(pol.Revision))
	default:
		s := row("policy: "+policySource(pol), "revision ", shortRevision(pol.Revision))
		p.line(2, "%s", s+onlyIf(!pol.Since.IsZero(), " since "+when(pol.Since)))
	}
	for _, x := range st.Extensions {
		if name := cmp.Or(x.Name, x.Path); x.Loaded {
			p.line(2, "%s", row(fmt.Sprintf("extension %s (%s): loaded", name, x.Path), "version ", x.Version))
		} else {
			p.line(2, "extension %s (%s): %s failed to load: %s", name, x.Path, MarkWarning, x.Error)
		}
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

// textNodePolicies writes what the node enforces of the object it follows.
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
