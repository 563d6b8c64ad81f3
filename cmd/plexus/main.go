// Command plexus is the CNI plugin kubelet's runtime invokes. It runs the
// NPWG v1 pipeline in this process (thin mode).
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/cmd/internal/cniplugin"
	"github.com/plexus-cni/plexus/cmd/internal/stages"
)

// Version is set at build time.
var Version = "dev"

func main() {
	skel.PluginMainFuncs(
		cniplugin.Funcs(cniplugin.Options{Stages: stages.Build}),
		version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"),
		"plexus "+Version+": NPWG multi-network CNI meta-plugin",
	)
}
