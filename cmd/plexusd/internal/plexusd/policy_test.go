package plexusd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
)

// With an object configured and nothing activated yet, plexusd decides
// with the default paths; an activated revision replaces them, and a
// deletion with AllowAll allows everything.
func TestObjectPolicyFollowsTheSyncer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	baseline := filepath.Join(dir, "baseline.yaml")
	// The sample asks for a NAD in its own namespace; this denies it.
	if err := os.WriteFile(baseline, []byte("plexus:\n  config:\n    nad_allowlist:\n      enabled: true\n      require_allowlist: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := filepath.Abs("../../../../policies/library")
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	rp, err := newReloadingPolicy(ctx, policies.Config{
		Paths:  []string{lib},
		Object: &policies.ObjectConfig{Name: "cluster", StateDir: filepath.Join(dir, "state"), DefaultPaths: []string{baseline}},
	}, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	decide := func() bool {
		d, err := rp.Authorize(ctx, policies.SampleRequest())
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	if decide() || rp.NodePolicy().Source != "files" {
		t.Fatalf("before any revision: allowed=%v, source %q; want the defaults denying", decide(), rp.NodePolicy().Source)
	}
	obj := &plexusapi.AttachmentPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", Generation: 1},
		Spec:       plexusapi.AttachmentPolicySpec{Data: map[string]string{"open.yaml": "plexus:\n  config: {}\n"}, OnDelete: plexusapi.OnDeleteAllowAll},
	}
	rp.observe(rp.sync.Apply(ctx, obj))
	// A replay of a refused generation is not counted again.
	broken := obj.DeepCopyObject().(*plexusapi.AttachmentPolicy)
	broken.Generation, broken.Spec.Modules = 2, map[string]string{"broken.rego": "package x\n\nallow if {"}
	rp.observe(rp.sync.Apply(ctx, broken))
	rp.observe(rp.sync.Apply(ctx, broken))
	if got := testutil.ToFloat64(m.policyReloads.WithLabelValues("failed")); got != 1 {
		t.Errorf("plexus_policy_reloads_total{result=failed} = %v after one refused generation seen twice, want 1", got)
	}
	if !decide() || rp.NodePolicy().Source != "object" || rp.NodePolicy().Revision == "" {
		t.Fatalf("after activation: allowed=%v, %+v; want the object's revision allowing", decide(), rp.NodePolicy())
	}
	rp.observe(rp.sync.Delete(ctx))
	if !decide() || rp.NodePolicy().Source != "none" || rp.NeedsNamespaceLabels() {
		t.Fatalf("after deletion with AllowAll: allowed=%v, %+v", decide(), rp.NodePolicy())
	}
}
