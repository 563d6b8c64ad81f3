package layout

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/plexus-cni/plexus/"

// leaves are libraries that import nothing of plexus but other leaves:
// they can be read, tested and replaced on their own.
var leaves = []string{
	"core/names", "core/status", "core/config/daemonconf", "core/codes", "core/api/v1alpha1",
	"extensions/wasmbin", "extensions/copier", "extensions/pack/ociarchive",
	"cmd/internal/cniargs", "cmd/internal/cri", "cmd/internal/podresources", "cmd/internal/podroute",
	"cmd/internal/logfile", "cmd/internal/daemon/wire", "cmd/internal/hostroot",
}

// rule: a package matching pkg may import the plexus packages matching
// one of allow. The first rule a package matches is its rule.
type rule struct {
	pkg   string
	allow []string
}

// rules point inward: each program (cmd/NAME) over what programs share
// (cmd/internal) over the stages (policies, extensions) over the spec
// (core) over leaves. No program imports another's packages, and the two
// stages know nothing of each other.
func rules(programs []string) []rule {
	// Tests may use anything; the build's own tools (outside the product)
	// import nothing of plexus.
	rs := []rule{{"tests/...", []string{"..."}}, {"tools/...", nil}}
	for _, l := range leaves {
		rs = append(rs, rule{l, leaves})
	}
	rs = append(rs,
		rule{"core/...", []string{"core/..."}},
		rule{"policies/...", []string{"core/...", "policies/..."}},
		rule{"extensions/...", []string{"core/...", "extensions/..."}},
		rule{"cmd/internal/...", []string{"core/...", "policies/...", "extensions/...", "cmd/internal/..."}},
	)
	for _, prog := range programs {
		rs = append(rs, rule{"cmd/" + prog + "/...", []string{"core/...", "policies/...", "extensions/...", "cmd/internal/...", "cmd/" + prog + "/..."}})
	}
	return rs
}

// programs are the directories under cmd/ but internal: one binary each.
func programs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "internal" {
			names = append(names, e.Name())
		}
	}
	return names
}

// forbiddenLinks: what a binary or layer may not link, directly or not.
var forbiddenLinks = []struct {
	pkgs   string
	links  []string
	reason string
}{
	{"./core/...", []string{"github.com/open-policy-agent/", "github.com/tetratelabs/wazero"}, "core knows nothing of OPA or wazero"},
	{"./cmd/plexus", []string{"github.com/google/go-containerregistry"}, "packing extension images is plexusctl's"},
	{"./cmd/plexusd", []string{"github.com/google/go-containerregistry"}, "packing extension images is plexusctl's"},
	{"./cmd/plexus-ext-copy", []string{"github.com/google/", "github.com/tetratelabs/", "k8s.io/", module + "core", module + "policies", module + "cmd/internal"}, "the copier every extension image carries stays small and static"},
	{"./cmd/plexus-shim", []string{"github.com/containernetworking/cni/libcni", "github.com/open-policy-agent/", "github.com/tetratelabs/wazero", "k8s.io/client-go"}, "the shim only forwards a call to plexusd"},
}

type pkgInfo struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func goList(t *testing.T, deps bool, patterns ...string) []pkgInfo {
	t.Helper()
	args := []string{"list", "-json=ImportPath,Imports,Deps"}
	if deps {
		args = append(args, "-deps")
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", patterns, err, stderr.String())
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// own strips the module path from a plexus package; false for others,
// and for the SDK, a module of its own that imports nothing of plexus.
func own(importPath string) (string, bool) {
	rel, ok := strings.CutPrefix(importPath, module)
	if !ok || rel == "sdk" || strings.HasPrefix(rel, "sdk/") {
		return "", false
	}
	return rel, true
}

// matches: "a/..." is a and everything below it, "..." everything.
func matches(pattern, pkg string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func ruleFor(rs []rule, pkg string) (rule, bool) {
	for _, r := range rs {
		if matches(r.pkg, pkg) {
			return r, true
		}
	}
	return rule{}, false
}

func allowed(r rule, imp string) bool {
	for _, a := range r.allow {
		if matches(a, imp) {
			return true
		}
	}
	return false
}

// TestImportsPointInward fails on every import of a plexus package that
// its layer does not allow, and on a package no rule covers.
func TestImportsPointInward(t *testing.T) {
	rs := rules(programs(t))
	for _, p := range goList(t, false, "./...") {
		pkg, ok := own(p.ImportPath)
		if !ok {
			continue
		}
		r, ok := ruleFor(rs, pkg)
		if !ok {
			t.Errorf("%s: no layering rule covers it; add one to rules()", pkg)
			continue
		}
		for _, i := range p.Imports {
			imp, ok := own(i)
			if ok && !allowed(r, imp) {
				t.Errorf("%s imports %s: a package under %q may import only %v", pkg, imp, r.pkg, r.allow)
			}
		}
	}
}

// TestNothingLinksWhatItMustNot checks the transitive dependencies of
// the packages named in forbiddenLinks.
func TestNothingLinksWhatItMustNot(t *testing.T) {
	for _, f := range forbiddenLinks {
		for _, p := range goList(t, true, f.pkgs) {
			if _, ok := own(p.ImportPath); !ok {
				continue
			}
			for _, d := range p.Deps {
				for _, bad := range f.links {
					if strings.HasPrefix(d, bad) {
						t.Errorf("%s links %s: %s", p.ImportPath, d, f.reason)
					}
				}
			}
		}
	}
}

func TestRuleMatching(t *testing.T) {
	for _, tc := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"core/...", "core", true}, {"core/...", "core/pipeline", true}, {"core/...", "corex", false},
		{"policies", "policies", true}, {"policies", "policies/x", false}, {"...", path.Join("a", "b"), true},
	} {
		if got := matches(tc.pattern, tc.pkg); got != tc.want {
			t.Errorf("matches(%q, %q) = %v", tc.pattern, tc.pkg, got)
		}
	}
	if _, ok := own(module + "sdk/abi"); ok {
		t.Error("the SDK module counted as plexus's own")
	}
}
