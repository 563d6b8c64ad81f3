package explain

import (
	"testing"

	"github.com/plexus-cni/plexus/internal/plexusd"
)

// The condition explain reads is the one plexusd writes; the constant is
// copied so that plexusctl does not link plexusd.
func TestConditionTypeIsPlexusds(t *testing.T) {
	if ConditionType != plexusd.ConditionType {
		t.Fatalf("ConditionType %q, plexusd writes %q", ConditionType, plexusd.ConditionType)
	}
}
