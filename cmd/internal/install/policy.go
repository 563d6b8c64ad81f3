package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

// Bounds on the policy files copied (the image's are a few dozen kilobytes).
const (
	maxPolicyFiles = 256
	maxPolicyBytes = 8 << 20
	maxPolicyDepth = 3 // PolicySrcDir/a/b/file
)

// policyFiles lists the files the policy engine reads in dir, sorted.
func policyFiles(dir string) ([]string, error) {
	var out []string
	var total int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			if strings.Count(rel, string(filepath.Separator))+1 >= maxPolicyDepth {
				return fmt.Errorf("%s: deeper than %d levels", p, maxPolicyDepth-1)
			}
			return nil
		}
		if !e.Type().IsRegular() || !isPolicyFile(e.Name()) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		out = append(out, filepath.ToSlash(rel))
		if len(out) > maxPolicyFiles || total > maxPolicyBytes {
			return fmt.Errorf("more than %d files or %d bytes", maxPolicyFiles, maxPolicyBytes)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("policy files in %s: %w", dir, err)
	}
	slices.Sort(out)
	return out, nil
}

func isPolicyFile(name string) bool {
	switch filepath.Ext(name) {
	case ".rego":
		return !strings.HasSuffix(name, "_test.rego")
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// InstallPolicy mirrors PolicySrcDir's policy files into PolicyDir on the
// host, each through a temporary file and a rename; a policy file there
// that the source does not hold (an older image's) is removed.
func (in *Installer) InstallPolicy() error {
	if in.o.PolicyDir == "" {
		return nil
	}
	files, err := policyFiles(in.o.PolicySrcDir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("policy files in %s: none", in.o.PolicySrcDir)
	}
	for _, f := range files {
		dst := filepath.Join(in.o.PolicyDir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("policy file %s: %w", f, err)
		}
		changed, err := copyIfChanged(filepath.Join(in.o.PolicySrcDir, filepath.FromSlash(f)), dst, 0o644)
		if err != nil {
			return fmt.Errorf("policy file %s: %w", f, err)
		}
		if changed {
			in.o.Log.Info("installed policy file", "path", dst)
		}
	}
	old, err := policyFiles(in.o.PolicyDir)
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, found := slices.BinarySearch(files, f); !found {
			p := filepath.Join(in.o.PolicyDir, filepath.FromSlash(f))
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			in.o.Log.Info("removed a policy file the image no longer holds", "path", p)
		}
	}
	return nil
}

// uninstallPolicy removes the policy files, then the emptied directories.
func (in *Installer) uninstallPolicy() error {
	if in.o.PolicyDir == "" {
		return nil
	}
	files, err := policyFiles(in.o.PolicyDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	dirs := map[string]bool{in.o.PolicyDir: true}
	for _, f := range files {
		p := filepath.Join(in.o.PolicyDir, filepath.FromSlash(f))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		dirs[filepath.Dir(p)] = true
	}
	// Deepest first, so a parent is empty by its turn.
	for _, d := range slices.SortedFunc(maps.Keys(dirs), func(a, b string) int { return len(b) - len(a) }) {
		_ = os.Remove(d) // only if empty
	}
	return errors.Join(errs...)
}

// policyLibrary is the library's directory under PolicyDir and PolicySrcDir.
const policyLibrary = "library"

// checkPolicyObject checks the PolicyObject options and sets "policy".
func (o *Options) checkPolicyObject() error {
	if o.PolicyObject == "" {
		return nil
	}
	if o.PolicyDir == "" {
		return fmt.Errorf("policy object %q: needs a policy dir to keep its revisions in", o.PolicyObject)
	}
	if o.Plexus == nil || o.NodeName == "" {
		return fmt.Errorf("policy object %q: needs the API and the node name", o.PolicyObject)
	}
	pc, err := o.policyConfig()
	if err != nil {
		return err
	}
	if len(pc.Paths) > 0 || pc.Object != nil {
		return fmt.Errorf(`policy object %q: --config's "policy" may not set "paths" or "object": the installer names the library and the active revision`, o.PolicyObject)
	}
	if len(o.PolicyDefaults) == 0 {
		o.PolicyDefaults = []string{filepath.Join(o.PolicyDir, policies.BaselineFile)}
	}
	for _, p := range o.PolicyDefaults {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("policy default %q: want an absolute path", p)
		}
	}
	policy := map[string]any{"paths": []string{filepath.Join(o.PolicyDir, policyLibrary), filepath.Join(o.PolicyDir, "active")}}
	if pc.Query != "" {
		policy["query"] = pc.Query
	}
	if pc.Deadline != 0 {
		policy["deadline"] = pc.Deadline
	}
	if o.Extra == nil {
		o.Extra = map[string]any{}
	}
	o.Extra["policy"] = policy
	return nil
}

// policyConfig decodes --config's "policy", if any.
func (o *Options) policyConfig() (policies.Config, error) {
	var pc policies.Config
	raw, ok := o.Extra["policy"]
	if !ok {
		return pc, nil
	}
	b, err := json.Marshal(raw)
	if err == nil {
		err = json.Unmarshal(b, &pc)
	}
	if err != nil {
		return pc, fmt.Errorf(`--config's "policy": %w`, err)
	}
	return pc, nil
}

// startPolicyObject puts the node's policy in force, then follows the object.
func (in *Installer) startPolicyObject(ctx context.Context) error {
	if in.o.PolicyObject == "" {
		return nil
	}
	pc, err := in.o.policyConfig()
	if err != nil {
		return err
	}
	pc.Paths = []string{filepath.Join(in.o.PolicyDir, policyLibrary)}
	pc.Object = &policies.ObjectConfig{Name: in.o.PolicyObject, StateDir: in.o.PolicyDir, DefaultPaths: in.o.PolicyDefaults}
	s, err := revision.New(revision.Options{Config: pc, Log: in.o.Log})
	if err != nil {
		return err
	}
	res, err := s.Start(ctx)
	if err != nil {
		return fmt.Errorf("policy object %s: %w", in.o.PolicyObject, err)
	}
	in.o.Log.Info("policy in force", "object", in.o.PolicyObject, "source", res.State.Source, "revision", res.State.Revision)
	if in.agent == nil {
		in.o.Log.Warn("no node agent: the policy in force stays until the installer restarts", "object", in.o.PolicyObject)
		return nil
	}
	return in.agent.Follow(ctx, s, nil)
}

// uninstallPolicyObject removes the revisions kept for the object.
func (in *Installer) uninstallPolicyObject() error {
	if in.o.PolicyObject == "" {
		return nil
	}
	if err := revision.Remove(in.o.PolicyDir); err != nil {
		return errors.Join(fmt.Errorf("policy object %s", in.o.PolicyObject), err)
	}
	return nil
}

// NodePolicy is the policy the plugin loads, for the node's PlexusNode.
func (in *Installer) NodePolicy() *plexusapi.NodePolicy {
	if _, ok := in.o.Extra["policy"]; ok {
		return &plexusapi.NodePolicy{Source: "files"}
	}
	return nil
}
