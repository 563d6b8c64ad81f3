package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/policies"
	"github.com/plexus-cni/plexus/policies/revision"
)

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
