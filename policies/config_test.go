package policies

import (
	"context"
	"strings"
	"testing"
)

// The plugin cannot keep an object's revisions: a config naming one is
// refused with the fix, not loaded without it.
func TestNewRefusesObjectKey(t *testing.T) {
	_, err := New(context.Background(), Config{
		Paths:  []string{"library"},
		Object: &ObjectConfig{Name: "cluster", StateDir: "/var/lib/cni/plexus/policy"},
	})
	if err == nil || !strings.Contains(err.Error(), `"object"`) || !strings.Contains(err.Error(), "--policy-object") {
		t.Fatalf("New with an object: %v, want an error naming the key and the fix", err)
	}
}
