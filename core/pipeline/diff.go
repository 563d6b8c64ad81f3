package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/record"
	"github.com/plexus-cni/plexus/core/selection"
)

// Diff is how a running pod's record differs from its selection now.
type Diff struct {
	// Keep maps an element's index to the record attachment it already
	// has: same network, interface, requested ips and mac.
	Keep    map[int]int
	Detach  []int    // record indices to undo, in record order
	Attach  []int    // element indices to attach, in selection order
	IfNames []string // per element, the interface it has or gets
}

// Empty reports a diff with nothing to do.
func (d *Diff) Empty() bool { return len(d.Detach) == 0 && len(d.Attach) == 0 }

// DiffAttachments matches the record's completed secondary attachments to
// the elements, by network, requested ips and mac, and interface: the
// requested one, or any no element requests, so removing an element does
// not rename the others' generated interfaces. The rest is detached or
// attached; new interfaces follow s4.1.2.1.5 and s4.2.1.
func DiffAttachments(rec *record.Record, els []*selection.Element) (*Diff, error) {
	d := &Diff{Keep: map[int]int{}, IfNames: make([]string, len(els))}
	requested := map[string]bool{} // and "", which no attachment's interface is
	for _, el := range els {
		requested[el.Interface] = true
	}
	matched := map[int]bool{}
	match := func(i int, el *selection.Element) {
		for j := range rec.Attachments {
			a := &rec.Attachments[j]
			onIt := a.IfName == el.Interface || el.Interface == "" && !requested[a.IfName]
			if matched[j] || a.Default || a.Fixed || a.State != record.Attached || a.Name != el.Ref() || !sameRequests(a, el) || !onIt {
				continue
			}
			matched[j], d.Keep[i], d.IfNames[i] = true, j, a.IfName
			return
		}
	}
	for _, requests := range []bool{true, false} { // requested interfaces first
		for i, el := range els {
			if (el.Interface != "") == requests {
				match(i, el)
			}
		}
	}
	for j, a := range rec.Attachments {
		if !matched[j] && !a.Default && !a.Fixed && a.State != record.Planned {
			d.Detach = append(d.Detach, j)
		}
	}
	if err := d.assignNew(rec, els); err != nil {
		return nil, err
	}
	return d, nil
}

// assignNew gives every unmatched element its interface (AssignInterfaces).
func (d *Diff) assignNew(rec *record.Record, els []*selection.Element) error {
	used := map[string]string{}
	for _, a := range rec.Attachments {
		if a.Default || a.Fixed {
			used[a.IfName] = interfaceOwner(a.Default, a.Name)
		}
	}
	for i, j := range d.Keep {
		used[rec.Attachments[j].IfName] = fmt.Sprintf("selection element %d (%s)", i, els[i].Ref())
	}
	var adds []*selection.Element
	for i, el := range els {
		if _, kept := d.Keep[i]; !kept {
			d.Attach = append(d.Attach, i)
			adds = append(adds, el)
		}
	}
	ifNames, err := AssignInterfaces(used, adds)
	if err != nil {
		return err
	}
	for k, i := range d.Attach {
		d.IfNames[i] = ifNames[k]
	}
	return nil
}

// sameRequests: the attachment's ips and mac capability args are el's.
func sameRequests(a *record.Attachment, el *selection.Element) bool {
	var ips []string
	switch v := a.CapabilityArgs["ips"].(type) {
	case []string:
		ips = v
	case []any:
		for _, x := range v {
			s, _ := x.(string)
			ips = append(ips, s)
		}
	}
	mac, _ := a.CapabilityArgs["mac"].(string)
	return mac == el.MAC && slices.Equal(ips, el.IPs)
}

// label names an attachment in messages and events.
func label(name, ifName string) string { return name + " (" + ifName + ")" }

func labels(list []string) string { return strings.Join(list, ", ") }
