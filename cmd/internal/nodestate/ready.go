package nodestate

import (
	"cmp"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plexusapi "github.com/plexus-cni/plexus/core/api/v1alpha1"
	"github.com/plexus-cni/plexus/core/config"
)

// Reasons of the Ready condition.
const (
	ReasonReady              = "Ready"
	ReasonConfigNotInstalled = "ConfigNotInstalled"
	ReasonNoDefaultNetwork   = "DefaultNetworkNotFound"
	ReasonPluginsMissing     = "PluginsMissing"
	ReasonPolicyRefused      = "PolicyRefused"
	ReasonExtensionFailed    = "ExtensionNotLoaded"
)

// ready is the Ready condition of st: False with the first thing that
// keeps the node from working, in the order an operator fixes them.
func ready(st *plexusapi.PlexusNodeStatus) metav1.Condition {
	c := metav1.Condition{Type: plexusapi.ConditionReady, Status: metav1.ConditionFalse}
	switch {
	case !st.ConfigInstalled:
		c.Reason, c.Message = ReasonConfigNotInstalled, "plexus's CNI config is not installed"
	case st.DefaultNetwork == "":
		c.Reason, c.Message = ReasonNoDefaultNetwork, "no cluster-wide default network found"
	case len(st.MissingPlugins) > 0:
		c.Reason, c.Message = ReasonPluginsMissing, "CNI plugins missing from the bin dirs: "+strings.Join(st.MissingPlugins, ", ")
	case st.Policy != nil && st.Policy.Error != "":
		c.Reason, c.Message = ReasonPolicyRefused, fmt.Sprintf("generation %d of %s refused: %s", st.Policy.ObservedGeneration, st.Policy.Object, st.Policy.Error)
	default:
		for _, e := range st.Extensions {
			if !e.Loaded {
				c.Reason, c.Message = ReasonExtensionFailed, fmt.Sprintf("extension %s not loaded: %s", e.Path, e.Error)
				return c
			}
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonReady, "plexus is installed and enforces its policy"
	}
	return c
}

// Settings are the values of c that decide a plan; found is the default network's file.
func Settings(c *config.Config, found string) *plexusapi.NodeSettings {
	compat := config.CompatOff
	if c.MultusCompat() {
		compat = config.CompatMultus
	}
	return &plexusapi.NodeSettings{
		ClusterNetwork: cmp.Or(c.ClusterNetwork, found), Compat: compat,
		SystemNamespace:  cmp.Or(c.SystemNamespace, config.DefaultSystemNamespace),
		StrictSelection:  c.StrictSelection,
		DefaultNetworks:  bounded(c.DefaultNetworks),
		SystemNamespaces: bounded(c.SystemNamespaces),
	}
}

// bounded keeps a list within the CRD's bound.
func bounded(l []string) []string {
	return append([]string(nil), l[:min(len(l), maxSettingsItems)]...)
}

const maxSettingsItems = 64
