// Command plexus is the CNI plugin kubelet's runtime invokes: it runs the
// NPWG v1 pipeline in this process (thin mode), with the s7.4 policy and
// extension stages when its config has them. In thick mode the runtime
// runs plexus-shim, which runs plexus only for a DEL while plexusd is down.
package main

import (
	"os"

	"github.com/plexus-cni/plexus/internal/cniplugin"
	"github.com/plexus-cni/plexus/internal/stages"
)

// Version is set at build time.
var Version = "dev"

func main() {
	os.Exit(cniplugin.Main(cniplugin.Options{Stages: stages.Options{}.Build}, "plexus "+Version+": NPWG multi-network CNI meta-plugin"))
}
