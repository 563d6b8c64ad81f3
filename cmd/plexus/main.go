// Command plexus is the CNI plugin kubelet's runtime invokes. It runs the
// NPWG v1 pipeline in this process (thin mode).
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/plexus-cni/plexus/internal/cniplugin"
	"github.com/plexus-cni/plexus/internal/stages"
)

// Version is set at build time.
var Version = "dev"

func main() {
	skel.PluginMainFuncs(
		cniplugin.Funcs(cniplugin.Options{Stages: stages.Build}),
		cniplugin.Versions,
		"plexus "+Version+": NPWG multi-network CNI meta-plugin",
	)
}
