package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/plexus-cni/plexus/cmd/internal/nodestate"
	"github.com/plexus-cni/plexus/core/api/client/clientset/versioned/fake"
	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies/revision"
)

func testOptions(c *fake.Clientset) Options {
	return Options{Options: nodestate.Options{
		Client: c, Node: "node-a", FieldManager: nodestate.ManagerInstaller, Mode: nodestate.ModeThin, Version: "v1",
		Install: func() nodestate.Install { return nodestate.Install{ConfigInstalled: true, DefaultNetwork: "pod-net"} },
		Policy:  func() *plexusapi.NodePolicy { return &plexusapi.NodePolicy{Source: "files", Revision: "abc"} },
	}}
}

// Without a followed object, the agent reports the provider's policy in
// the node's PlexusNode once notified.
func TestAgentReportsTheNode(t *testing.T) {
	c := fake.NewSimpleClientset()
	applied := make(chan []byte, 10)
	c.PrependReactor("patch", "plexusnodes", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if p := act.(k8stesting.PatchAction); p.GetPatchType() == types.ApplyPatchType && p.GetSubresource() == "status" {
			applied <- p.GetPatch()
		}
		return true, &plexusapi.PlexusNode{}, nil
	})
	a, err := New(testOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	a.Notify()
	select {
	case body := <-applied:
		var got plexusapi.PlexusNode
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Name != "node-a" || got.Status.Policy == nil || got.Status.Policy.Revision != "abc" || !got.Status.ConfigInstalled || got.Status.Mode != "thin" {
			t.Errorf("applied %s, want node-a's installer state and the files policy", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no status apply after Notify")
	}
}

func TestAgentFollowsOneObject(t *testing.T) {
	a, err := New(testOptions(fake.NewClientset()))
	if err != nil {
		t.Fatal(err)
	}
	// The watch ends at once: the object itself is not needed here.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := &revision.Syncer{}
	if err := a.Follow(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Follow(ctx, s, nil); err == nil {
		t.Error("a second Follow was accepted: a node follows one object")
	}
}

func TestNewNeedsAClient(t *testing.T) {
	if _, err := New(Options{Options: nodestate.Options{Node: "n", FieldManager: "c", Mode: nodestate.ModeThin, Install: func() nodestate.Install { return nodestate.Install{} }}}); err == nil {
		t.Error("an agent without an API client was built")
	}
}
