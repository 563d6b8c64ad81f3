package follow

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies/revision"
)

// A node writes its entry only when it changed; the API keeps seconds,
// so an entry read back compares equal to the one written.
func TestEntryComparesAsTheAPIKeepsIt(t *testing.T) {
	since := time.Date(2026, 11, 25, 19, 0, 0, 123456789, time.UTC)
	st := revision.State{Source: revision.SourceObject, Generation: 2, Revision: "2-0123456789ab", Since: since, ObservedGeneration: 2, TestsPassed: 3}
	written := Entry("node-1", st)
	readBack := written
	readBack.ActiveSince = metav1.NewTime(since.Truncate(time.Second).In(time.FixedZone("x", 3600)))
	if !sameEntry(written, readBack) {
		t.Errorf("an entry read back differs from the one written: %+v vs %+v", written, readBack)
	}
	refused := st
	refused.ObservedGeneration, refused.Error = 3, "revision 3-...: does not compile"
	if sameEntry(written, Entry("node-1", refused)) {
		t.Error("a refusal compares equal to the entry before it")
	}
	if e := Entry("node-1", revision.State{Source: revision.SourceDefaults, Revision: "defaults"}); e.ActiveGeneration != 0 {
		t.Errorf("defaults reported as generation %d of the object", e.ActiveGeneration)
	}
}

func TestNodePolicyNamesTheSource(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{revision.SourceObject, "object"}, {revision.SourceDefaults, "files"}, {revision.SourceNone, "none"},
	} {
		got := NodePolicy("cluster", revision.State{Source: tc.source, Revision: "r"})
		if got.Source != tc.want || got.Object != "cluster" {
			t.Errorf("source %s: %+v, want source %s", tc.source, got, tc.want)
		}
	}
	var _ plexusapi.NodePolicy = NodePolicy("cluster", revision.State{})
}
