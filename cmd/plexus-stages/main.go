// Command plexus-stages is the plexus plugin with the optional stages, the
// s7.4 policy engine and the extension host, built in. It runs what plexus
// runs; plexus hands it an ADD whose config has "policy" or "extensions",
// and the installer names it as the type of such a config.
package main

import (
	"os"

	"github.com/plexus-cni/plexus/internal/cniplugin"
	"github.com/plexus-cni/plexus/internal/stages"
)

// Version is set at build time.
var Version = "dev"

func main() {
	os.Exit(cniplugin.Main(cniplugin.Options{Stages: stages.Build}, "plexus-stages "+Version+": NPWG multi-network CNI meta-plugin with policies and extensions"))
}
