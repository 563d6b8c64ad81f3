// Package agent is the node agent both modes run (plexusd; the thin
// installer): it follows the AttachmentPolicy the node's config names,
// recording each attempt as an Event, and reports the node in its
// PlexusNode. What differs between the modes comes in as providers.
package agent

import (
	"context"
	"errors"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies/follow"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Options configure an Agent: its reporter's, whose Client also reads the
// AttachmentPolicy, whose FieldManager is also the Events' source, and
// whose Policy reports the policy when no object is followed; and Core,
// which records Events (nil records none).
type Options struct {
	nodestate.Options
	Core kubernetes.Interface
}

// Agent follows a node's policy object and reports the node.
type Agent struct {
	o        Options
	reporter *nodestate.Reporter
	recorder record.EventRecorder
	stop     func()
	// syncer is set once by Follow, which may run after Run started.
	syncer atomic.Pointer[revision.Syncer]
}

// New builds the agent; nothing is written before Run.
func New(o Options) (*Agent, error) {
	a := &Agent{o: o, stop: func() {}}
	ro := o.Options
	ro.Policy = a.policy
	r, err := nodestate.New(ro)
	if err != nil {
		return nil, err
	}
	a.reporter = r
	if o.Core != nil {
		a.recorder, a.stop = follow.NewRecorder(o.Core, o.FieldManager, o.Node)
	}
	return a, nil
}

// policy is the followed object's revision in force, else the provider's.
func (a *Agent) policy() *plexusapi.NodePolicy {
	if s := a.syncer.Load(); s != nil {
		np := follow.NodePolicy(s.Name(), s.State())
		return &np
	}
	if a.o.Policy != nil {
		return a.o.Policy()
	}
	return nil
}

// Notify asks for the PlexusNode to be assembled again (nodestate).
func (a *Agent) Notify() { a.reporter.Notify() }

// Follow watches s's object until ctx ends; onResult sees each attempt first.
func (a *Agent) Follow(ctx context.Context, s *revision.Syncer, onResult func(revision.Result, error)) error {
	if !a.syncer.CompareAndSwap(nil, s) {
		return errors.New("node agent: already follows a policy object")
	}
	w, err := follow.New(follow.Options{
		Syncer: s, Client: a.o.Client, Recorder: a.recorder, Node: a.o.Node, Log: a.o.Log,
		OnResult: func(res revision.Result, err error) {
			if onResult != nil {
				onResult(res, err)
			}
			a.reporter.Notify()
		},
	})
	if err != nil {
		return err
	}
	go w.Run(ctx)
	return nil
}

// Run reports the node until ctx ends, then stops the event recorder.
func (a *Agent) Run(ctx context.Context) {
	defer a.stop()
	a.reporter.Run(ctx)
}
