package follow

import (
	"testing"
	"time"

	"github.com/plexus-cni/plexus/policies/revision"
)

func TestNodePolicyNamesTheSource(t *testing.T) {
	for _, tc := range []struct {
		source, want string
		generation   int64
	}{
		{revision.SourceObject, "object", 4}, {revision.SourceDefaults, "files", 0}, {revision.SourceNone, "none", 0},
	} {
		got := NodePolicy("cluster", revision.State{Source: tc.source, Revision: "r", Generation: 4})
		if got.Source != tc.want || got.Object != "cluster" || got.Generation != tc.generation {
			t.Errorf("source %s: %+v, want source %s, generation %d", tc.source, got, tc.want, tc.generation)
		}
	}
}

// The API keeps seconds: a node's report must compare equal to what it
// reads back, or it would write again on every pass.
func TestNodePolicyKeepsSecondsAsTheAPIDoes(t *testing.T) {
	since := time.Date(2026, 11, 25, 19, 0, 0, 123456789, time.FixedZone("x", 3600))
	got := NodePolicy("cluster", revision.State{Source: revision.SourceObject, Since: since, ObservedGeneration: 3, Error: "refused", TestsPassed: 2})
	if !got.Since.Time.Equal(since.Truncate(time.Second)) || got.Since.Location() != time.UTC {
		t.Errorf("since %v, want %v in UTC", got.Since, since.Truncate(time.Second))
	}
	if got.ObservedGeneration != 3 || got.Error != "refused" || got.TestsPassed != 2 {
		t.Errorf("the last attempt is not reported: %+v", got)
	}
}
