// Command plexus is the CNI plugin kubelet's runtime invokes. It runs the
// NPWG v1 pipeline in this process (thin mode), or forwards the call to
// plexusd when its config names plexusd's socket. It links no optional
// stage: an ADD whose config has "policy" or "extensions" runs in
// plexus-stages, installed beside it.
package main

import (
	"os"

	"github.com/plexus-cni/plexus/internal/cniplugin"
)

// Version is set at build time.
var Version = "dev"

func main() {
	os.Exit(cniplugin.Main(cniplugin.Options{HandOffStages: true}, "plexus "+Version+": NPWG multi-network CNI meta-plugin"))
}
