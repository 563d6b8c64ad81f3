// Command plexus-shim is thick mode's CNI plugin: it forwards every call
// to plexusd and relays the answer (package shim).
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/plexus-cni/plexus/cmd/plexus-shim/internal/shim"
)

// Version is set at build time.
var Version = "dev"

func main() {
	skel.PluginMainFuncs(shim.Funcs(os.Stdout, os.Stderr), shim.Versions(), "plexus-shim "+Version+": forwards CNI calls to plexusd")
}
