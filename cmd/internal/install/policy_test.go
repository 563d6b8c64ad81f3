package install

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// withPolicy gives the node an image policy directory as the image holds
// one (a library with a test module, and the baseline) and returns
// options copying it to plexus.d/policy.
func (n *node) withPolicy() Options {
	n.t.Helper()
	src := filepath.Join(filepath.Dir(n.src), "policy")
	must(n.t, os.MkdirAll(filepath.Join(src, "library"), 0o755))
	n.write(filepath.Join(src, "library", "authz.rego"), "package plexus.authz\n")
	n.write(filepath.Join(src, "library", "authz_test.rego"), "package plexus.authz_test\n")
	n.write(filepath.Join(src, "library", "README.md"), "# not a policy file\n")
	n.write(filepath.Join(src, "baseline.yaml"), "plexus: {}\n")
	o := n.options()
	o.PolicySrcDir, o.PolicyDir = src, filepath.Join(n.conf, "plexus.d", "policy")
	return o
}

// TestPolicyInstalledBeforeTheConfig: the policy files are on the host
// before plexus's config that names them, without the library's tests;
// an upgrade's image that drops a module has it removed from the host;
// the uninstall removes them and plexus.d.
func TestPolicyInstalledBeforeTheConfig(t *testing.T) {
	n := newNode(t)
	o := n.withPolicy()
	o.Uninstall = true
	stale := filepath.Join(o.PolicyDir, "library", "old_rule.rego")
	must(t, os.MkdirAll(filepath.Dir(stale), 0o755))
	n.write(stale, "package plexus.rules.old_rule\n")
	n.writeDefault("10-bridge.conflist")
	in, err := New(o)
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	waitFor(t, "plexus's config", func() bool { return exists(n.ours()) })
	for _, f := range []string{"library/authz.rego", "baseline.yaml"} {
		b, err := os.ReadFile(filepath.Join(o.PolicyDir, f))
		must(t, err)
		want, _ := os.ReadFile(filepath.Join(o.PolicySrcDir, f))
		if string(b) != string(want) {
			t.Errorf("%s: %q, want %q", f, b, want)
		}
	}
	for _, f := range []string{"library/authz_test.rego", "library/README.md", "library/old_rule.rego"} {
		if exists(filepath.Join(o.PolicyDir, f)) {
			t.Errorf("%s installed", f)
		}
	}
	cancel()
	must(t, <-done)
	for _, p := range []string{o.PolicyDir, filepath.Dir(n.kubeconfig)} {
		if exists(p) {
			t.Errorf("%s left after uninstall", p)
		}
	}
}

func TestPolicyDirRefusedWhereOthersFilesAre(t *testing.T) {
	n := newNode(t)
	for _, tc := range []struct {
		name string
		dir  func(o Options) string
		want string
	}{
		{"the conf dir", func(o Options) string { return o.ConfDir }, "conf dir"},
		{"a parent of the bin dir", func(o Options) string { return filepath.Dir(o.BinDir) }, "bin dir"},
		{"the source", func(o Options) string { return o.PolicySrcDir }, "policy source dir"},
		{"a relative path", func(Options) string { return "policy" }, "absolute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := n.withPolicy()
			o.PolicyDir = tc.dir(o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error naming %q", err, tc.want)
			}
		})
	}
	o := n.withPolicy()
	o.BinariesOnly = true
	if _, err := New(o); err == nil {
		t.Error("a binaries-only installer accepted a policy dir")
	}
}

// TestPolicyFilesBounded: a source with more files than an image's
// library has is refused before anything is copied.
func TestPolicyFilesBounded(t *testing.T) {
	n := newNode(t)
	o := n.withPolicy()
	for i := range maxPolicyFiles + 1 {
		n.write(filepath.Join(o.PolicySrcDir, "library", "r"+strconv.Itoa(i)+".rego"), "package x\n")
	}
	in, err := New(o)
	must(t, err)
	if err := in.InstallPolicy(); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("InstallPolicy: %v, want the bound", err)
	}
	if exists(o.PolicyDir) {
		t.Error("files copied anyway")
	}
}
