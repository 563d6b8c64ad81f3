package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/status"
)

// ConditionType is the pod condition plexusd sets when it changes a
// running pod's attachments.
const ConditionType = plexusapi.PodConditionNetworkAttachments

// maxEvents bounds the events shown; the most relevant come first.
const maxEvents = 20

// lastAdd reads what the last ADD left: the network-status annotation
// (s5), plexusd's pod condition and the pod's events.
func (b *builder) lastAdd(ctx context.Context) {
	l := &LastAdd{}
	b.r.LastAdd = l
	b.networkStatus(l)
	if b.obj == nil {
		return
	}
	l.Condition = condition(b.obj)
	if c := l.Condition; c != nil && c.Status == string(corev1.ConditionFalse) {
		b.problem("pod condition %s is False: %s: %s", ConditionType, c.Reason, c.Message)
	}
	evs, err := b.opts.Cluster.events(ctx, b.pod)
	if err != nil {
		l.EventsError = err.Error()
		b.warn("%v", err)
		return
	}
	started, _ := time.Parse(time.RFC3339, b.r.Pod.Started) // zero unless the pod runs
	l.Events = relevantEvents(evs, b.pod.NodeName, started)
	for _, e := range l.Events {
		if e.OtherNode != "" {
			b.warn("event %s on the pod was reported by plexus on node %s, not the pod's node %s: not this pod's plexus", e.Reason, e.OtherNode, b.pod.NodeName)
		}
	}
}

// networkStatus reads the s5 annotation and checks it has every attachment.
func (b *builder) networkStatus(l *LastAdd) {
	v, ok := b.pod.Annotations[status.Annotation]
	if !ok {
		return
	}
	l.StatusPresent = true
	var entries []status.Entry
	if err := json.Unmarshal([]byte(v), &entries); err != nil {
		l.StatusError = err.Error()
		b.warn("the %s annotation is not a JSON list of status maps (s5): %v", status.Annotation, err)
		return
	}
	for _, e := range entries {
		l.Status = append(l.Status, StatusEntry{Name: e.Name, Interface: e.Interface, IPs: e.IPs, MAC: e.MAC, Default: e.Default})
	}
	for _, a := range b.r.DefaultNetworks {
		if !hasEntry(l.Status, a.Network, a.Interface) {
			b.problem("defaultNetworks %s: %s has no entry for it on %s: the last ADD did not attach it", a.Network, status.Annotation, a.Interface)
		}
	}
	for _, a := range b.r.Attachments {
		if !hasEntry(l.Status, a.Network, a.Interface) {
			b.problem("selection element %d (%s): %s has no entry for it on %s: the last ADD did not attach it", a.Index, a.Network, status.Annotation, a.Interface)
		}
	}
}

// hasEntry matches by name (s5.3.1) and, where the entry has one,
// interface (s5.3.2).
func hasEntry(entries []StatusEntry, name, ifName string) bool {
	return slices.ContainsFunc(entries, func(e StatusEntry) bool {
		return e.Name == name && (e.Interface == "" || e.Interface == ifName)
	})
}

func condition(p *corev1.Pod) *Condition {
	for _, c := range p.Status.Conditions {
		if string(c.Type) != ConditionType {
			continue
		}
		out := &Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		if !c.LastTransitionTime.IsZero() {
			out.Time = c.LastTransitionTime.UTC().Format(time.RFC3339)
		}
		return out
	}
	return nil
}

// relevantEvents puts warnings first, then the newest. It marks plexus's
// events from another node than podNode (admission binds a node's events
// to its name, not to its pods), and as Old the warnings last seen before
// the running pod started: the run that followed got past them.
func relevantEvents(evs []corev1.Event, podNode string, started time.Time) []Event {
	slices.SortStableFunc(evs, func(a, b corev1.Event) int {
		if wa, wb := a.Type == corev1.EventTypeWarning, b.Type == corev1.EventTypeWarning; wa != wb {
			if wa {
				return -1
			}
			return 1
		}
		return cmp.Compare(lastTime(b).UnixNano(), lastTime(a).UnixNano())
	})
	var out []Event
	for _, e := range evs[:min(len(evs), maxEvents)] {
		ev := Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Source: cmp.Or(e.Source.Component, e.ReportingController)}
		// source.host, or the reporting instance of an events.k8s.io/v1
		// event: admission binds both to the writer's node.
		host := cmp.Or(e.Source.Host, e.ReportingInstance)
		if isPlexus(ev.Source) && podNode != "" && host != podNode {
			ev.OtherNode = cmp.Or(host, "(none named)")
		}
		if t := lastTime(e); !t.IsZero() {
			ev.LastTime = t.UTC().Format(time.RFC3339)
			ev.Old = e.Type == corev1.EventTypeWarning && t.Before(started)
		}
		out = append(out, ev)
	}
	return out
}

func lastTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// isPlexus: the event's component is one of plexus's programs.
func isPlexus(component string) bool {
	return component == "plexus" || component == "plexusd" || strings.HasPrefix(component, "plexus.io/")
}
