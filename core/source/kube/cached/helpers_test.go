package cached

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/plexus-cni/plexus/core/source"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

func equal(a, b []string) bool { return slices.Equal(a, b) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantUID(t *testing.T, got any, uid string) {
	t.Helper()
	if p := got.(*source.Pod); p.UID != uid {
		t.Errorf("pod %s has UID %q, want %q", p.Ref(), p.UID, uid)
	}
}

func cacheTombstone() *cache.DeletedFinalStateUnknown {
	return &cache.DeletedFinalStateUnknown{Key: "demo/x"}
}

// eventually waits for an informer to deliver a change; the bound is
// generous and only there so a lost event fails instead of hanging.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s never reached the cache", what)
}
